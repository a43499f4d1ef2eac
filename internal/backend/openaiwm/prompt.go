package openaiwm

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/wmrl/wmrl/internal/backend"
)

// TemplateData is what the prompt template sees of an item.
type TemplateData struct {
	// Suite and TaskID identify the task; Prompt is its text, empty for
	// the built-in suite (the model must know the task by suite and id).
	Suite  uint64
	TaskID string
	Prompt string
	// Solution is the solution's text, to be put between two Fence lines:
	// Fence is a run of backticks longer than any in Solution, so the
	// solution cannot close the block.
	Solution string
	Fence    string
}

// DefaultTemplate is the user message of a request unless Config.Template
// replaces it. internal/serve/openaiserve reads the task and the solution
// back from the lines "Task: <id> (suite <n>)" and the fenced block after
// "Solution:", which a replacement must keep for that server.
const DefaultTemplate = `You are a world model of program execution. Predict, without running it, how the solution below fares when it is executed and graded on its task.

Task: {{.TaskID}} (suite {{.Suite}})
{{- if .Prompt}}

Task description:
{{.Prompt}}
{{- else}}
This task belongs to the built-in tabular suite: identify it by its suite and id.
{{- end}}

Solution:
{{.Fence}}
{{.Solution}}
{{.Fence}}

Grading follows a reward ladder: a program that does not parse scores 0; one that fails at run time (error, timeout, memory) 0.1; one that runs but produces no valid output 0.2; a valid one 0.5 + 0.5 * q, where q in [0,1] is its position on the task's leaderboard.

Answer with a single JSON object, last in your reply:
{"status": "malformed" | "syntax_err" | "runtime_err" | "ran_no_sub" | "valid", "quality": q}
with q your predicted leaderboard position in [0,1] (used when the status is "valid"), or {"score": s} with s your predicted score in [0,1].`

func parseTemplate(text string) (*template.Template, error) {
	if text == "" {
		text = DefaultTemplate
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	// Rendering a sample catches references to fields TemplateData lacks.
	var b strings.Builder
	if err := t.Execute(&b, TemplateData{Suite: 1, TaskID: "t", Solution: "x", Fence: "```"}); err != nil {
		return nil, err
	}
	return t, nil
}

// Fence returns a run of backticks, at least three, longer than any run of
// backticks in s.
func Fence(s string) string {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// Render renders the user message of an item with the template t (nil:
// DefaultTemplate).
func Render(t *template.Template, it backend.ScoreItem) (string, error) {
	if t == nil {
		var err error
		if t, err = parseTemplate(""); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	err := t.Execute(&b, TemplateData{Suite: it.Task.Suite, TaskID: it.Task.ID, Prompt: it.Task.Prompt,
		Solution: it.Solution, Fence: Fence(it.Solution)})
	if err != nil {
		return "", fmt.Errorf("render prompt: %w", err)
	}
	return b.String(), nil
}

// ReadPrompt reads the task and the solution back from a user message that
// DefaultTemplate rendered: the first line "Task: <id> (suite <n>)" and the
// block between the fence line after "Solution:" and the same fence.
func ReadPrompt(text string) (suite uint64, taskID, solution string, err error) {
	m := taskLine.FindStringSubmatch(text)
	if m == nil {
		return 0, "", "", errors.New(`no line "Task: <id> (suite <n>)"`)
	}
	suite, err = strconv.ParseUint(m[2], 10, 64)
	if err != nil {
		return 0, "", "", fmt.Errorf("suite %q: %w", m[2], err)
	}
	const head = "\nSolution:\n"
	i := strings.Index(text, head)
	if i < 0 {
		return 0, "", "", errors.New(`no line "Solution:"`)
	}
	rest := text[i+len(head):]
	n := 0
	for n < len(rest) && rest[n] == '`' {
		n++
	}
	if n < 3 || n >= len(rest) || rest[n] != '\n' {
		return 0, "", "", errors.New(`no fence line of three or more backticks after "Solution:"`)
	}
	fence := rest[:n]
	body := rest[n+1:]
	j := strings.Index(body, "\n"+fence+"\n")
	if j < 0 {
		if !strings.HasSuffix(body, "\n"+fence) {
			return 0, "", "", errors.New("the solution's fenced block is not closed")
		}
		j = len(body) - len(fence) - 1
	}
	return suite, m[1], body[:j], nil
}

var taskLine = regexp.MustCompile(`(?m)^Task: (\S+) \(suite ([0-9]+)\)$`)
