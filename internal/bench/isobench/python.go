package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// python is the long-lived scikit-learn process: one command line in, one
// reply line out (see sklearn_iso.py).
type python struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startPython(ctx context.Context, bin, script string) (*python, error) {
	cmd := exec.CommandContext(ctx, bin, script)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("python stdin: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("python stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", bin, script, err)
	}
	return &python{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// call sends one command and returns the reply after its "ok ".
func (p *python) call(args ...string) (string, error) {
	line := strings.Join(args, " ")
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		return "", fmt.Errorf("python %s: %w", args[0], err)
	}
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return "", fmt.Errorf("python %s: %w", args[0], err)
		}
		return "", fmt.Errorf("python %s: %w: no reply", args[0], errPython)
	}
	reply := p.out.Text()
	rest, ok := strings.CutPrefix(reply, "ok")
	if !ok {
		return "", fmt.Errorf("python %s: %w: %s", args[0], errPython, reply)
	}
	return strings.TrimSpace(rest), nil
}

// close ends the input and waits for the process to exit.
func (p *python) close() error {
	p.in.Close()
	return p.cmd.Wait()
}
