package executor

import "golang.org/x/sys/unix"

// spawnArch is the audit architecture of this build; arm64 has no fork or
// vfork system calls.
func spawnArch() (arch uint32, extra []uint32, ok bool) {
	return unix.AUDIT_ARCH_AARCH64, nil, true
}
