package workflows

import (
	"os/exec"
	"strings"
	"testing"
)

// The workflows build without the Docker client and without the store: the
// run config they carry holds backend.Limits, not the sandbox's aliases
// (which bring the Docker client, its 20-odd packages, into every worker's
// workflow code), and the activities' requests and responses are the
// activities' own types, not the store's.
func TestWorkflowsDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "docker") || strings.HasSuffix(p, "/internal/sandbox") {
			t.Errorf("workflows depend on %s", p)
		}
	}
	out, err = exec.Command(goBin, "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -f: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasSuffix(p, "/internal/store") {
			t.Errorf("workflows import %s", p)
		}
	}
}
