//go:build !linux

package executor

import (
	"fmt"
	"runtime"
)

// Apply fails: the executor's self-limits use Linux rlimits.
func (s Setup) Apply() error {
	return fmt.Errorf("executor limits are not supported on %s", runtime.GOOS)
}

// SelfCPUSeconds is not measured outside Linux.
func SelfCPUSeconds() float64 { return 0 }
