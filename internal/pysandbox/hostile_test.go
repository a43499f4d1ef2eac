package pysandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/dockerrun"
)

// succeed is what a hostile solution does when its attack worked: it
// writes a valid submission, so the test sees status valid and fails.
const succeed = `
import shutil
shutil.copy("/data/public/sample_submission.csv", "/work/submission.csv")
`

// TestHostile runs solutions that attack the sandbox, each for its
// expected status, and checks that none leaves anything behind.
func TestHostile(t *testing.T) {
	e := newTestEnv(t, Options{SubmissionBytes: 1 << 20})
	// Host paths a solution must not reach.
	paths := strings.NewReplacer(
		"HOST_ANSWERS", e.a.Path("private/answers.csv"),
		"HOST_OTHER", e.b.Path("public/train.csv"),
		"HOST_STORE", e.store.Dir,
		"HOST_STAGING", e.staging,
	)
	short := 3 * time.Second
	cases := []struct {
		name     string
		source   string
		deadline time.Duration
		want     Status
		failure  Failure
		detail   string // in Detail
		feedback string // in Feedback
	}{
		{name: "empty", source: "", want: StatusMalformed, detail: "empty"},
		{name: "blank", source: " \n\t\n", want: StatusMalformed, detail: "empty"},
		{name: "syntax", source: "def f(:\n    pass\n", want: StatusSyntaxErr, detail: "SyntaxError"},
		{name: "null-bytes", source: "x = 1\x00\n", want: StatusSyntaxErr},
		{name: "forged-syntax-exit", want: StatusRuntimeErr, failure: FailureExit, detail: "exit code 3", source: `
import os, sys
sys.stderr.write("SyntaxError: forged\n")
sys.stderr.flush()
os._exit(3)
`},
		{name: "raise", source: "raise ValueError('boom')\n", want: StatusRuntimeErr, failure: FailureExit, detail: "ValueError: boom"},
		{name: "exit-nonzero-after-submission", want: StatusRuntimeErr, failure: FailureExit, source: succeed + "raise SystemExit(2)\n"},
		{name: "fork-bomb", deadline: short, want: StatusRuntimeErr, failure: FailureTimeout, source: `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
`},
		{name: "fork-bomb-left-running", deadline: finishDeadline, want: StatusValid, source: `
import os, time
if os.fork() == 0:
    while True:
        try:
            os.fork()
        except OSError:
            pass
time.sleep(1)
` + succeed},
		{name: "memory-hog", want: StatusRuntimeErr, failure: FailureMemory, source: `
chunks = []
while True:
    chunks.append(b"x" * (16 << 20))
`},
		{name: "infinite-loop", deadline: short, want: StatusRuntimeErr, failure: FailureTimeout, source: "while True:\n    pass\n"},
		{name: "sleep-past-deadline", deadline: short, want: StatusRuntimeErr, failure: FailureTimeout, source: "import time\ntime.sleep(3600)\n"},
		{name: "network", want: StatusRuntimeErr, failure: FailureExit, detail: "no network", source: `
import socket
reached = []
for host, port in [("1.1.1.1", 53), ("8.8.8.8", 443), ("172.17.0.1", 2375), ("127.0.0.1", 2375)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        reached.append(host)
    except OSError:
        pass
try:
    socket.getaddrinfo("deb.debian.org", 80)
    reached.append("dns")
except OSError:
    pass
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect("/var/run/docker.sock")
    reached.append("docker.sock")
except OSError:
    pass
ifaces = [name for _, name in socket.if_nameindex() if name != "lo"]
if reached or ifaces:
    print("reached", reached, "interfaces", ifaces)
` + succeed + `
raise SystemExit("no network")
`},
		{name: "write-outside-work", want: StatusRuntimeErr, failure: FailureExit, detail: "nothing written", source: `
import os
wrote = []
for p in ["/x", "/data/x", "/data/public/train.csv", "/data/public/x", "/data/task.json", "/code/solution.py",
          "/etc/passwd", "/usr/lib/python3/dist-packages/x.py", "/root/x", "/var/x", "HOST_STORE/x", "HOST_STAGING/x"]:
    try:
        with open(p, "a") as f:
            f.write("x")
        wrote.append(p)
    except OSError:
        pass
for d in ["/data/public", "/code", "/"]:
    try:
        os.chmod(d, 0o777)
        wrote.append("chmod " + d)
    except OSError:
        pass
if wrote:
    print("wrote", wrote)
` + succeed + `
raise SystemExit("nothing written")
`},
		{name: "read-private-and-host", want: StatusRuntimeErr, failure: FailureExit, detail: "nothing read", source: `
import os
got = []
for p in ["/data/private/answers.csv", "/data/../private/answers.csv", "/data/public/../private/answers.csv",
          "HOST_ANSWERS", "HOST_OTHER", "/etc/shadow", "/proc/1/root/etc/shadow", "/proc/1/environ"]:
    try:
        with open(p) as f:
            f.read(1)
        got.append(p)
    except OSError:
        pass
# Anything of the other task's or the private answers anywhere?
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/usr", "/dev")]
    for name in files:
        if name in ("answers.csv", "leaderboard.csv", "task.yaml") or "synth-b" in root:
            got.append(os.path.join(root, name))
if os.path.exists("HOST_STORE") or os.path.exists("HOST_STAGING"):
    got.append("host directories")
if got:
    print("read", got)
` + succeed + `
raise SystemExit("nothing read")
`},
		{name: "stdout-flood-endless", deadline: short, want: StatusRuntimeErr, failure: FailureTimeout, source: `
import sys
chunk = b"y" * (1 << 20)
while True:
    sys.stdout.buffer.write(chunk)
`},
		{name: "stdout-flood", deadline: finishDeadline, want: StatusValid, source: `
import sys
chunk = b"y" * (1 << 20)
for _ in range(256):
    sys.stdout.buffer.write(chunk)
    sys.stderr.buffer.write(chunk[:4096])
` + succeed + "print('THE-END')\n", feedback: "THE-END"},
		{name: "stderr-flood-then-crash", deadline: finishDeadline, want: StatusRuntimeErr, failure: FailureExit,
			detail: "exit code 1", feedback: "ValueError: the end", source: `
import sys
chunk = b"e" * (1 << 20)
for _ in range(96):
    sys.stderr.buffer.write(chunk)
raise ValueError("the end")
`},
		{name: "kill-parent-and-keeper", want: StatusRuntimeErr, failure: FailureSignal, source: succeed + `
import os, signal
for pid in (1, -1, os.getppid()):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
`},
		{name: "kill-everything-then-exit-0", want: StatusRanNoSub, detail: "stopped the reader", source: succeed + `
import os, signal
os.kill(-1, signal.SIGKILL)
`},
		{name: "multiprocessing", want: StatusValid, source: `
from multiprocessing import Pool
with Pool(2) as p:
    assert p.map(abs, [-1, -2]) == [1, 2]
` + succeed},
		{name: "background-process", want: StatusValid, source: `
import os, subprocess, sys
subprocess.Popen(["/bin/sleep", "1000"], start_new_session=True, stdout=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    while True:
        sys.stdout.write("still here\n")
        sys.stdout.flush()
        __import__("time").sleep(0.05)
` + succeed},
		{name: "binary-dropped", want: StatusRuntimeErr, failure: FailureExit, detail: "nothing executed", source: `
import os, shutil, subprocess
ran = []
for d in ["/work", "/tmp", "/dev/shm"]:
    p = os.path.join(d, "t")
    try:
        shutil.copy("/bin/true", p)
        os.chmod(p, 0o755)
    except OSError:
        continue
    for cmd in ([p], ["/lib64/ld-linux-x86-64.so.2", p]):
        try:
            if subprocess.run(cmd, capture_output=True).returncode == 0:
                ran.append(cmd)
        except OSError:
            pass
if ran:
    print("ran", ran)
` + succeed + `
raise SystemExit("nothing executed")
`},
		{name: "what-it-sees", want: StatusValid, source: `
import json, os
spec = json.load(open("/data/task.json"))
assert spec["id"] == "synth-a" and spec["labels"] == ["no", "yes"], spec
assert open("/data/description.md").read().startswith("# Synthetic"), "description"
assert sorted(os.listdir("/data")) == ["description.md", "public", "task.json"], os.listdir("/data")
assert sorted(os.listdir("/data/public")) == ["sample_submission.csv", "test.csv", "train.csv"], os.listdir("/data/public")
assert sorted(os.listdir("/code")) == ["solution.py"], os.listdir("/code")
assert os.getuid() == 65534 and os.getgid() == 65534 and os.getcwd() == "/work", (os.getuid(), os.getcwd())
assert open("/proc/self/status").read().count("CapEff:\t0000000000000000") == 1, "capabilities"
assert "NoNewPrivs:\t1" in open("/proc/self/status").read(), "no-new-privileges"
allowed = {"/", "/work", "/tmp", "/data", "/data/public", "/code", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue",
           "/etc/resolv.conf", "/etc/hostname", "/etc/hosts"}
for line in open("/proc/self/mountinfo"):
    f = line.split()
    point, opts = f[4], f[5]
    if point.startswith(("/proc", "/sys")):
        continue
    assert point in allowed, "unexpected mount " + point
    if point in ("/", "/data", "/data/public", "/code"):
        assert opts.split(",")[0] == "ro", point + " is not read-only: " + opts
    if point in ("/work", "/tmp"):
        assert "noexec" in opts, point + ": " + opts
` + succeed},
		{name: "no-submission", want: StatusRanNoSub, detail: "no /work/submission.csv", source: "print('done')\n"},
		{name: "empty-submission", want: StatusRanNoSub, detail: "refused", source: "open('submission.csv', 'w').close()\n"},
		{name: "garbage-submission", want: StatusRanNoSub, detail: "refused", source: "open('submission.csv', 'wb').write(bytes(range(256)) * 10)\n"},
		{name: "wrong-columns", want: StatusRanNoSub, detail: "columns", source: `
import pandas as pd
s = pd.read_csv("/data/public/sample_submission.csv")
s.rename(columns={"label": "target"}).to_csv("submission.csv", index=False)
`},
		{name: "missing-row", want: StatusRanNoSub, detail: "no row for test id", source: `
import pandas as pd
pd.read_csv("/data/public/sample_submission.csv").iloc[1:].to_csv("submission.csv", index=False)
`},
		{name: "extra-row", want: StatusRanNoSub, detail: "not a test id", source: `
import pandas as pd
s = pd.read_csv("/data/public/sample_submission.csv")
pd.concat([s, pd.DataFrame({"id": [999999], "label": ["no"]})]).to_csv("submission.csv", index=False)
`},
		{name: "bad-label", want: StatusRanNoSub, detail: "refused", source: `
import pandas as pd
s = pd.read_csv("/data/public/sample_submission.csv")
s["label"] = "maybe"
s.to_csv("submission.csv", index=False)
`},
		{name: "symlink-submission", want: StatusRanNoSub, detail: "not a regular file", source: `
import os
os.symlink("/data/public/sample_submission.csv", "submission.csv")
`},
		{name: "fifo-submission", want: StatusRanNoSub, detail: "not a regular file", source: "import os\nos.mkfifo('submission.csv')\n"},
		{name: "huge-submission", want: StatusRanNoSub, detail: "more than the 1048576 allowed", source: `
with open("submission.csv", "wb") as f:
    f.write(b"id,label\n" + b"1,no\n" * (1 << 20))
`},
		{name: "fill-work", want: StatusRuntimeErr, failure: FailureExit, detail: "No space left", source: `
with open("big", "wb") as f:
    while True:
        f.write(b"z" * (1 << 20))
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			deadline := c.deadline
			if deadline == 0 {
				deadline = finishDeadline
			}
			start := time.Now()
			r := e.grade(t, paths.Replace(c.source), deadline)
			if r.Status != c.want || r.Failure != c.failure || !strings.Contains(r.Detail, c.detail) {
				t.Errorf("%s (%s): %s; want %s (%s) with %q\nstdout: %.300s\nstderr: %.500s",
					r.Status, r.Failure, r.Detail, c.want, c.failure, c.detail, r.Run.Stdout, r.Run.Stderr)
			}
			if want := Reward(c.want, r.Position); !near(r.Score, want) {
				t.Errorf("score %v, want %v", r.Score, want)
			}
			if c.want == StatusMalformed && r.Run.Container != "" {
				t.Errorf("a malformed solution ran in container %.12s", r.Run.Container)
			}
			// A flooded stream keeps its head and tail, DefaultOutputBytes in
			// all, and the line saying how much was cut between them.
			for _, st := range []struct {
				name    string
				kept    []byte
				written int64
			}{{"stdout", r.Run.Stdout, r.Run.StdoutBytes}, {"stderr", r.Run.Stderr, r.Run.StderrBytes}} {
				if st.written <= DefaultOutputBytes {
					continue
				}
				if cut := dockerrun.CutLine(st.written - DefaultOutputBytes); len(st.kept) != DefaultOutputBytes+len(cut) ||
					!strings.Contains(string(st.kept), cut) {
					t.Errorf("%d bytes of %s written, %d kept; want %d and the cut line", st.written, st.name, len(st.kept),
						DefaultOutputBytes+len(cut))
				}
			}
			if strings.Contains(c.name, "flood") && r.Run.StdoutBytes+r.Run.StderrBytes < 64<<20 {
				t.Errorf("a flood of %d + %d bytes", r.Run.StdoutBytes, r.Run.StderrBytes)
			}
			if !strings.Contains(r.Feedback, c.feedback) {
				t.Errorf("feedback lacks %q:\n%s", c.feedback, r.Feedback)
			}
			if n := len(r.Feedback); n > 2*(feedbackHeadBytes+feedbackTailBytes)+1024 {
				t.Errorf("feedback of %d bytes", n)
			}
			t.Logf("%s (%s) in %.1f s: %.200s", r.Status, r.Failure, time.Since(start).Seconds(), r.Detail)
		})
	}
}
