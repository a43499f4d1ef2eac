package executor

import "golang.org/x/sys/unix"

// spawnArch is the audit architecture of this build and its process-creating
// system calls beyond clone, clone3, execve and execveat.
func spawnArch() (arch uint32, extra []uint32, ok bool) {
	return unix.AUDIT_ARCH_X86_64, []uint32{unix.SYS_FORK, unix.SYS_VFORK}, true
}
