package executor

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// forbidSpawn installs a seccomp filter on every thread of the process that
// makes creating a process fail with EPERM: fork, vfork, clone without
// CLONE_THREAD, clone3 (ENOSYS), execve and execveat. New threads stay
// allowed, so the Go runtime works; a foreign architecture is killed.
func forbidSpawn() error {
	arch, extra, ok := spawnArch()
	if !ok {
		return fmt.Errorf("no process filter for %s", runtime.GOARCH)
	}
	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		// Offsets in struct seccomp_data: nr, arch, then the arguments;
		// the low 32 bits of args[0] on a little-endian machine.
		offNr, offArch, offArg0 = 0, 4, 16
	)
	prog := []unix.SockFilter{
		{Code: ldAbs, K: offArch},
		{Code: jeq, K: arch, Jt: 1},
		{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: ldAbs, K: offNr},
		{Code: jeq, K: unix.SYS_CLONE, Jf: 4}, // not clone: on to the list
		{Code: ldAbs, K: offArg0},             // clone's flags
		{Code: jset, K: unix.CLONE_THREAD, Jf: 1},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: eperm},
		{Code: jeq, K: unix.SYS_CLONE3, Jf: 1},
		{Code: ret, K: enosys},
	}
	for _, nr := range append([]uint32{unix.SYS_EXECVE, unix.SYS_EXECVEAT}, extra...) {
		prog = append(prog, unix.SockFilter{Code: jeq, K: nr, Jf: 1}, unix.SockFilter{Code: ret, K: eperm})
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})

	// no_new_privs is a property of the calling thread, and seccomp refuses
	// (EACCES) a caller without it: both calls must run on one OS thread,
	// or the scheduler may move the goroutine between them.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("install seccomp filter: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("install seccomp filter: thread %d did not synchronise", r)
	}
	return nil
}
