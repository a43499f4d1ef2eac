package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
)

func TestExtract(t *testing.T) {
	for _, tt := range []struct {
		name, give, lang, want string
		ok                     bool
	}{
		{"last python block", "Plan:\n```python\nprint(1)\n```\nBetter:\n```python\nprint(2)\n```\nDone.", "python", "print(2)", true},
		{"bare fence", "```\nimport pandas as pd\n```", "python", "import pandas as pd", true},
		{"other language skipped", "```python\nx = 1\n```\n```bash\nrm -rf /\n```", "python", "x = 1", true},
		{"cut at the token limit", "```python\nimport numpy as np\nX = np.load(", "python", "import numpy as np\nX = np.load(", true},
		{"longer fence holds a shorter one", "````python\ns = '''\n```\n'''\n````", "python", "s = '''\n```\n'''", true},
		{"no block", "I cannot help with that.", "python", "", false},
		{"empty block", "```python\n\n```", "python", "", false},
		{"builtin whole text", "  model ridge(alpha=1)\n", "builtin", "model ridge(alpha=1)", true},
		{"builtin fenced", "```\nmodel ridge(alpha=1)\n```", "builtin", "model ridge(alpha=1)", true},
		{"builtin empty", " \n", "builtin", "", false},
	} {
		got, ok := Extract(tt.give, tt.lang)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Extract = %q, %v, want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTemplate(t *testing.T) {
	d, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Render(Data{Suite: 7, ID: "wine-quality", Description: "Predict the quality.", Language: "python"})
	if err != nil || !strings.Contains(p, "Predict the quality.") || !strings.Contains(p, "```python") {
		t.Errorf("default python prompt = %q, %v", p, err)
	}
	p, err = d.Render(Data{Suite: 7, ID: "t03", Language: "builtin"})
	if err != nil || !strings.Contains(p, "Task t03 of suite 7") || strings.Contains(p, "python") {
		t.Errorf("default builtin prompt = %q, %v", p, err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tmpl")
	if err := os.WriteFile(bad, []byte("{{.Nope}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "Nope") {
		t.Errorf("a template naming an unknown field: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.tmpl")); err == nil {
		t.Error("a missing template file loaded")
	}
}

// TestParseAction: the analysis-and-script completion executes its
// script; the request_info tag alone asks for the data; a script beside
// the tag wins; no script and no tag is malformed.
func TestParseAction(t *testing.T) {
	script := "import pandas as pd\nprint(1)"
	tests := []struct {
		name, give, lang string
		want             Action
	}{
		{"analysis and script", "The baseline: a linear model.\n```python\n" + script + "\n```\n", "python",
			Action{Kind: backend.ActionExecuteCode, Solution: script}},
		{"unclosed fence", "Plan.\n```python\n" + script, "python", Action{Kind: backend.ActionExecuteCode, Solution: script}},
		{"request_info", "I need the columns first.\n<action>request_info</action>", "python", Action{Kind: backend.ActionRequestInfo}},
		{"request_info spaced", "<ACTION> request_info </ACTION>", "python", Action{Kind: backend.ActionRequestInfo}},
		{"script wins", "<action>request_info</action>\n```python\n" + script + "\n```", "python",
			Action{Kind: backend.ActionExecuteCode, Solution: script}},
		{"prose only", "I would train a random forest.", "python", Action{Kind: backend.ActionMalformed}},
		{"other language", "```bash\nls\n```", "python", Action{Kind: backend.ActionMalformed}},
		{"empty", "", "python", Action{Kind: backend.ActionMalformed}},
		{"the word alone", "maybe request_info later", "python", Action{Kind: backend.ActionMalformed}},
		{"builtin program", "standardize | ridge alpha=1", "builtin",
			Action{Kind: backend.ActionExecuteCode, Solution: "standardize | ridge alpha=1"}},
		{"builtin request_info", "<action>request_info</action>", "builtin", Action{Kind: backend.ActionRequestInfo}},
		{"builtin blank", " \n", "builtin", Action{Kind: backend.ActionMalformed}},
	}
	for _, tt := range tests {
		if got := ParseAction(tt.give, tt.lang); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
