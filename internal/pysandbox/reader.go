package pysandbox

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wmrl/wmrl/internal/dockerrun"
)

// The submission reader. The engine cannot copy a file out of a tmpfs
// mount, so an exec reads /work/submission.csv and writes it on its
// stdout. It is started before the solution and waits on its stdin, so
// that whatever the solution leaves behind (a fork bomb holding every pid,
// the memory full) cannot keep it from starting; told to go, it kills
// every process of the solution still running (kill -1 spares itself and
// the keeper, PID 1) and writes the file out if it is a regular file of at
// most max bytes. A solution that kills the reader or tampers with it
// (same user) only loses its own submission.

// Exit codes of the reader.
const (
	readerMissing  = 4
	readerNotFile  = 5
	readerTooLarge = 6
)

// readerGrace bounds the reader's start and its read.
const readerGrace = 30 * time.Second

func readerProgram(max int64) string {
	return fmt.Sprintf(`import os, signal, stat, sys
sys.stdout.buffer.write(b"r")
sys.stdout.buffer.flush()
if sys.stdin.buffer.read(1) != b"g":
    sys.exit(2)
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
try:
    fd = os.open(%q, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except FileNotFoundError:
    sys.exit(%d)
except OSError as e:
    sys.stderr.write(str(e))
    sys.exit(%d)
st = os.fstat(fd)
if not stat.S_ISREG(st.st_mode):
    sys.stderr.write(stat.filemode(st.st_mode))
    sys.exit(%d)
if st.st_size > %d:
    sys.stderr.write(str(st.st_size))
    sys.exit(%d)
with os.fdopen(fd, "rb") as f:
    data = f.read(%d)
if len(data) > %d:
    sys.exit(%d)
sys.stdout.buffer.write(data)
`, submissionIn, readerMissing, readerNotFile, readerNotFile, max, readerTooLarge, max+1, max, readerTooLarge)
}

// subReader is a started reader, waiting to be told to go.
type subReader struct {
	s    *Sandbox
	exec string
	hj   types.HijackedResponse
	br   *bufio.Reader
}

// startReader starts the reader in container id and waits until it is
// ready. Its failure is the sandbox's: the solution has not run yet.
func (s *Sandbox) startReader(ctx context.Context, id, user string) (*subReader, error) {
	ex, err := s.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         user,
		WorkingDir:   "/",
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{python, "-I", "-S", "-B", "-c", readerProgram(s.opts.SubmissionBytes)},
	})
	if err != nil {
		return nil, fmt.Errorf("create submission reader: %w", err)
	}
	hj, err := s.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start submission reader: %w", err)
	}
	r := &subReader{s: s, exec: ex.ID, hj: hj, br: bufio.NewReader(hj.Reader)}
	ready := make(chan error, 1)
	go func() { ready <- r.readReady() }()
	select {
	case err = <-ready:
	case <-time.After(readerGrace):
		err = fmt.Errorf("not ready after %v", readerGrace)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		hj.Close()
		return nil, fmt.Errorf("start submission reader: %w", err)
	}
	return r, nil
}

// readReady reads the reader's first stdout frame, "r".
func (r *subReader) readReady() error {
	var h [8]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(h[4:])
	if h[0] != byte(stdcopy.Stdout) || n != 1 {
		b, _ := io.ReadAll(io.LimitReader(r.br, int64(min(n, 4096))))
		return fmt.Errorf("unexpected output (stream %d): %q", h[0], b)
	}
	b, err := r.br.ReadByte()
	if err != nil || b != 'r' {
		return fmt.Errorf("unexpected output %q (%v)", b, err)
	}
	return nil
}

func (r *subReader) close() { r.hj.Close() }

// read tells the reader to go and returns the submission, or nil and why
// there is none. An error means the engine failed.
func (r *subReader) read(ctx context.Context) ([]byte, string, error) {
	s := r.s
	rctx, cancel := context.WithTimeout(ctx, readerGrace)
	defer cancel()
	// Killed by the solution, the reader may no longer read: its exit
	// says so below.
	_, _ = r.hj.Conn.Write([]byte("g"))
	_ = r.hj.CloseWrite()
	max := s.opts.SubmissionBytes
	stdout, stderr := dockerrun.NewCapped(int(max)+1), dockerrun.NewCapped(4096)
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, r.br)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, "", fmt.Errorf("read the submission: %w", err)
		}
	case <-rctx.Done():
		r.hj.Close()
		<-done
		return nil, "", fmt.Errorf("read the submission: %w", rctx.Err())
	}
	var ins container.ExecInspect
	for {
		var err error
		if ins, err = s.cli.ContainerExecInspect(rctx, r.exec); err != nil {
			return nil, "", fmt.Errorf("inspect the submission reader: %w", err)
		}
		if !ins.Running {
			break
		}
		select {
		case <-rctx.Done():
			return nil, "", fmt.Errorf("submission reader still running: %w", rctx.Err())
		case <-time.After(pollEvery):
		}
	}
	msg := stderr.Bytes()
	switch ins.ExitCode {
	case 0:
		b, n := stdout.Bytes(), stdout.Total()
		if b == nil {
			b = []byte{} // an empty file is a submission
		}
		if n > max {
			return nil, fmt.Sprintf("%s has more than the %d bytes allowed", submissionIn, max), nil
		}
		return b, "", nil
	case readerMissing:
		return nil, "no " + submissionIn, nil
	case readerNotFile:
		return nil, fmt.Sprintf("%s is not a regular file (%s)", submissionIn, clip(string(msg), 200)), nil
	case readerTooLarge:
		return nil, fmt.Sprintf("%s has %s bytes, more than the %d allowed", submissionIn, clip(string(msg), 40), max), nil
	}
	return nil, fmt.Sprintf("the submission could not be read: the solution stopped the reader (exit %d)", ins.ExitCode), nil
}
