package grpoloop

import "syscall"

// rusageThread is RUSAGE_THREAD of getrusage(2) (Linux 2.6.26+), which the
// syscall package does not name.
const rusageThread = 1

// processCPUSeconds is the process's user + system CPU time.
func processCPUSeconds() float64 { return rusageSeconds(syscall.RUSAGE_SELF) }

// threadCPUSeconds is the calling thread's user + system CPU time.
func threadCPUSeconds() float64 { return rusageSeconds(rusageThread) }

func rusageSeconds(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
