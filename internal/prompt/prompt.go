// Package prompt renders a task as the text a language-model policy is
// prompted with, and takes the solution back out of its completion.
//
// A prompt is a text/template (the run config's policy.prompt_template
// names a file; Default otherwise) executed with Data. A solution is, for
// Python, the last fenced code block of the completion (```python ... ```
// or a bare ``` ... ```), and for the built-in pipeline language the whole
// completion; a completion holding none is malformed (Extract's ok is
// false), which the grader scores as an invalid program.
package prompt

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/template"

	"github.com/wmrl/wmrl/internal/backend"
)

// Data is what a template sees.
type Data struct {
	// Suite and ID identify the task.
	Suite uint64
	ID    string
	// Description is the task as text (a Python task's description.md);
	// empty for the built-in suite.
	Description string
	// Language is the solution's language: "python" or "builtin".
	Language string
}

// Default is the template used when a run names none.
const Default = `You are a research engineer. Solve the task below.
{{if .Description}}
{{.Description}}
{{else}}
Task {{.ID}} of suite {{.Suite}}.
{{end}}
{{- if eq .Language "python"}}
Answer with one Python program in a fenced code block (` + "```python" + `). It reads its data
from /data/public and writes /work/submission.csv.
{{- else}}
Answer with one program of the built-in pipeline language, and nothing else.
{{- end}}
`

// Template is a parsed prompt template.
type Template struct{ t *template.Template }

// Parse parses a template's text; name is for messages (a file name).
func Parse(name, text string) (*Template, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("prompt template %s: %w", name, err)
	}
	// Render once with sample data, so that a template naming a field
	// Data does not have fails when it is loaded, not at step 0.
	if err := t.Execute(&bytes.Buffer{}, Data{ID: "t", Language: "python", Description: "d"}); err != nil {
		return nil, fmt.Errorf("prompt template %s: %w", name, err)
	}
	return &Template{t: t}, nil
}

// Load reads a template file; "" gives Default.
func Load(path string) (*Template, error) {
	if path == "" {
		return Parse("default", Default)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompt template: %w", err)
	}
	return Parse(path, string(b))
}

// Render returns the prompt of a task.
func (t *Template) Render(d Data) (string, error) {
	var b bytes.Buffer
	if err := t.t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("render prompt of task %s: %w", d.ID, err)
	}
	return b.String(), nil
}

// fence matches a fenced code block: an opening fence of three or more
// backticks with an optional info string, the body, and a closing fence
// of the same length on its own line. An unclosed last block runs to the
// end of the text (a completion cut at its token limit).
var fence = regexp.MustCompile("(?m)^[ \t]*(`{3,})[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n")

// Extract returns the solution in a completion: for "python", the body of
// the last fenced block whose info string is empty, python or py (any
// other language's block is skipped); for the built-in language, the
// trimmed text with an enclosing fence removed. ok is false when there is
// no solution (the completion is malformed).
func Extract(completion, language string) (solution string, ok bool) {
	type block struct{ info, body string }
	var blocks []block
	rest := completion
	for {
		loc := fence.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		ticks := rest[loc[2]:loc[3]]
		info := strings.ToLower(rest[loc[4]:loc[5]])
		body := rest[loc[1]:]
		closeRe := regexp.MustCompile("(?m)^[ \t]*" + ticks + "[ \t]*$")
		end := closeRe.FindStringIndex(body)
		if end == nil {
			blocks = append(blocks, block{info, body})
			break
		}
		blocks = append(blocks, block{info, body[:end[0]]})
		rest = body[end[1]:]
	}
	switch language {
	case "python":
		for i := len(blocks) - 1; i >= 0; i-- {
			if b := blocks[i]; b.info == "" || b.info == "python" || b.info == "py" || b.info == "python3" {
				s := strings.TrimSpace(b.body)
				return s, s != ""
			}
		}
		return "", false
	default:
		if len(blocks) > 0 {
			s := strings.TrimSpace(blocks[len(blocks)-1].body)
			return s, s != ""
		}
		s := strings.TrimSpace(completion)
		return s, s != ""
	}
}

// Action is a language model's turn, taken out of its completion: its
// kind (backend.ActionExecuteCode, backend.ActionRequestInfo or
// backend.ActionMalformed) and, to execute, the solution.
type Action struct {
	Kind     string
	Solution string
}

// requestInfo is the request_info action's tag, as the reference's agents
// write it.
var requestInfo = regexp.MustCompile(`(?i)<action>\s*request_info\s*</action>`)

// ParseAction reads the action of a completion that holds an analysis and
// one complete script (the reference's turn): the solution Extract finds
// is executed (execute_code), also when the completion also carries a
// request_info tag (the script is the stronger sign of the model's
// choice, as in the reference); without one, a completion with the tag
// `<action>request_info</action>` asks for the data's structure
// (request_info); otherwise it is malformed (no action: the turn gets the
// ladder's invalid_program reward and is told so). In the built-in
// language a bare text is a program, as Extract takes it, so only a blank
// completion is malformed there.
func ParseAction(completion, language string) Action {
	if requestInfo.MatchString(completion) {
		if language != "python" || !hasFence(completion) {
			return Action{Kind: backend.ActionRequestInfo}
		}
	}
	if sol, ok := Extract(completion, language); ok {
		return Action{Kind: backend.ActionExecuteCode, Solution: sol}
	}
	return Action{Kind: backend.ActionMalformed}
}

// hasFence reports whether text holds a fenced block Extract would take.
func hasFence(text string) bool {
	_, ok := Extract(text, "python")
	return ok
}
