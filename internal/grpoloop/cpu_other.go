//go:build !linux

package grpoloop

// processCPUSeconds is not measured on this platform.
func processCPUSeconds() float64 { return 0 }

// threadCPUSeconds is not measured on this platform.
func threadCPUSeconds() float64 { return 0 }
