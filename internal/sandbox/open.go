package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Kinds of sandbox, as named on command lines and in configuration.
const (
	KindDocker  = "docker"
	KindProcess = "process"
)

// ExecutorEnv names the environment variable that may hold the path of the
// executor binary.
const ExecutorEnv = "WMRL_EXECUTOR"

// executorName is the executor binary's file name (make build puts it in bin/).
const executorName = "wmrl-executor"

// FindExecutor returns the path of the executor binary: explicit if given,
// else $WMRL_EXECUTOR, else wmrl-executor next to the running binary, else
// wmrl-executor on the PATH.
func FindExecutor(explicit string) (string, error) {
	if explicit != "" {
		return filepath.Abs(explicit)
	}
	if p := os.Getenv(ExecutorEnv); p != "" {
		return filepath.Abs(p)
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), executorName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath(executorName)
	if err != nil {
		return "", fmt.Errorf("no %s next to this binary, in $%s or on the PATH (make build puts it in bin/): %w",
			executorName, ExecutorEnv, err)
	}
	return filepath.Abs(p)
}

// Open returns the sandbox of the given kind running the executor binary,
// and a function that releases it. A Docker sandbox builds its image if the
// engine lacks it.
func Open(ctx context.Context, kind, executorBinary string) (Sandbox, func() error, error) {
	switch kind {
	case KindDocker:
		d, err := NewDocker(ctx, executorBinary)
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	case KindProcess:
		p, err := NewProcess(executorBinary)
		if err != nil {
			return nil, nil, err
		}
		return p, func() error { return nil }, nil
	}
	return nil, nil, fmt.Errorf("unknown sandbox %q (want %s or %s)", kind, KindDocker, KindProcess)
}
