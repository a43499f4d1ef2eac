// Command fakeexec stands in for wmrl-executor in the sandbox tests: it
// applies the same self-limits and reads the same job, then misbehaves as
// the job's program asks ("fake <mode>"), so every way an execution can end
// is exercised without depending on the suite.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/executor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		time.Sleep(time.Hour)
		return
	}
	setup, err := executor.ParseSetup(os.Args[0], os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := setup.Apply(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	job, err := executor.DecodeJob(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mode := strings.TrimPrefix(job.Program, "fake ")
	// Like wmrl-executor, it stops itself at its deadline, except when
	// deaf to it (to exercise the sandboxes' backstop kill).
	deadline := setup.Deadline
	if mode == "deaf" {
		deadline = 0
	}
	rep := executor.NewReporter(os.Stdout, deadline, os.Exit)
	ok := func(detail string) {
		rep.Report(executor.NewResult(executor.StatusOK, 0.9, 0.5, detail))
	}
	switch mode {
	case "ok":
		ok("")
	case "spin": // burn 300 ms of CPU, then succeed
		n := 0
		for executor.SelfCPUSeconds() < 0.3 {
			for i := 0; i < 1e6; i++ {
				n += i
			}
		}
		ok(fmt.Sprint(n))
	case "burn": // spin until killed
		n := 0
		for {
			n++
		}
	case "alloc": // touch memory until something gives
		var keep [][]byte
		for {
			b := make([]byte, 16<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
	case "sleep", "deaf":
		time.Sleep(time.Hour)
	case "silent": // exit 0 without a result line
	case "half": // exit 0 with half a result line
		line := executor.NewResult(executor.StatusOK, 0.9, 0.5, "").Line()
		os.Stdout.Write(line[:len(line)/2])
	case "garbage":
		fmt.Println("this is not a result")
	case "flood":
		line := strings.Repeat("x", 1<<10)
		for i := 0; i < 10<<10; i++ {
			fmt.Println(line)
		}
	case "threads": // block 32 OS threads in system calls
		for i := 0; i < 32; i++ {
			go func() {
				runtime.LockOSThread()
				time.Sleep(time.Hour)
			}()
		}
		time.Sleep(500 * time.Millisecond)
		ok("threads")
	case "reject":
		fmt.Fprintln(os.Stderr, "fake executor refuses its job")
		os.Exit(executor.ExitRejected)
	case "panic":
		panic("fake executor crashed")
	case "fork": // leave a child behind, then hang
		p, err := os.StartProcess("/proc/self/exe", []string{"fakeexec", "child"}, &os.ProcAttr{})
		if err != nil {
			ok("fork: " + err.Error())
			return
		}
		fmt.Fprintln(os.Stderr, "child", p.Pid)
		time.Sleep(time.Hour)
	case "probe": // report what the host lets it touch
		ok(probe())
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(3)
	}
}

// probe tries to write files and reach the network and reports each attempt
// as "name=ok" or "name=denied".
func probe() string {
	var out []string
	report := func(name string, err error) {
		if err == nil {
			out = append(out, name+"=ok")
		} else {
			out = append(out, name+"=denied")
		}
	}
	for _, dir := range []string{"/", "/tmp", os.TempDir()} {
		f, err := os.CreateTemp(dir, "wmrl-probe-*")
		if err == nil {
			_, err = f.Write([]byte("x"))
			f.Close()
			os.Remove(f.Name())
		}
		report("write:"+dir, err)
	}
	conn, err := net.DialTimeout("tcp", "1.1.1.1:80", 500*time.Millisecond)
	if err == nil {
		conn.Close()
	}
	report("dial", err)
	ifaces, _ := net.Interfaces()
	var up []string
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagLoopback == 0 {
			up = append(up, ifc.Name)
		}
	}
	out = append(out, "interfaces="+strings.Join(up, ","))
	p, err := os.StartProcess("/proc/self/exe", []string{"fakeexec", "child"}, &os.ProcAttr{})
	if err == nil {
		p.Kill()
		p.Wait()
	}
	report("spawn", err)
	return strings.Join(out, " ")
}
