package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
