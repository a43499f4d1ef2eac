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
	// Action is the turn's action (backend.ActionExecuteCode) for a turn
	// of a multi-turn trajectory, "" for a single-shot item; Numbered is
	// Solution with its lines numbered from 1 ("   1  first line"), as the
	// reference shows its world model the code, so that an error_line
	// means something. Fence is longer than any run of backticks in both.
	Action   string
	Numbered string
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

// DefaultTurnTemplate is the user message of a turn of a multi-turn
// trajectory (an item with an Action) unless Config.Template replaces it.
// It gives the model what the method's world-model server gives its model
// for an execute_code item (the task, its overview, the code with numbered
// lines; no earlier turns, which the reference does not send) and asks for
// the reference's answer (ParseAnswer): the top two predicted outcomes,
// each a status, error type and line, quality bucket and env_feedback
// mimicking the sandbox, the first one graded. internal/serve/openaiserve
// reads the task, the action and the code back from the lines "Task: <id>
// (suite <n>)", "Action: <action>" and the fenced block after "Code (lines
// numbered from 1):".
const DefaultTurnTemplate = `You are a world model of program execution for an agent that improves its solution over several turns. Predict, without running it, exactly what the sandbox reports when it executes the code below on its task: the agent reads your report as the sandbox's answer and fixes its code on its next turn.

Task: {{.TaskID}} (suite {{.Suite}})
Action: {{.Action}}
{{- if .Prompt}}

Task overview:
{{.Prompt}}
{{- else}}
This task belongs to the built-in tabular suite: identify it by its suite and id.
{{- end}}

Code (lines numbered from 1):
{{.Fence}}
{{.Numbered}}
{{.Fence}}

Simulate the run in order: parse, run (the first error wins), write the predictions, score them. The statuses: "malformed" (no program), "syntax_err" (it does not parse), "runtime_err" (it fails while running: an exception, the time or the memory limit), "ran_no_sub" (it runs but writes no valid predictions), "valid" (its predictions are scored on the task's leaderboard). For a valid run rate its leaderboard position as a quality bucket: "low", "fair", "mid" or "high"; do not invent a numeric score.

Answer with a single JSON object, last in your reply:
{"reason": "<at most three sentences>", "predictions": [{"status": "<status>", "error_type": "<the error's class for runtime_err, else empty>", "error_line": <the failing line's number, 0 if none>, "quality_bucket": "<the bucket for valid, else empty>", "env_feedback": "<the sandbox's report, as it would print it: for runtime_err the traceback, citing the line and ending in the error and its message>", "confidence": <0 to 1>}, <your second most likely outcome, with a different status>]}
The first prediction is your answer; the second is your hedge.`

func parseTemplate(text string) (*template.Template, error) {
	return parseNamed(text, DefaultTemplate)
}

// parseNamed parses text, or def when text is "".
func parseNamed(text, def string) (*template.Template, error) {
	if text == "" {
		text = def
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	// Rendering a sample catches references to fields TemplateData lacks.
	var b strings.Builder
	if err := t.Execute(&b, TemplateData{Suite: 1, TaskID: "t", Solution: "x", Fence: "```",
		Action: backend.ActionExecuteCode, Numbered: "   1  x"}); err != nil {
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
// DefaultTemplate for a single-shot item, DefaultTurnTemplate for a turn,
// an item with an Action).
func Render(t *template.Template, it backend.ScoreItem) (string, error) {
	if t == nil {
		def := DefaultTemplate
		if it.Action != "" {
			def = DefaultTurnTemplate
		}
		var err error
		if t, err = parseNamed("", def); err != nil {
			return "", err
		}
	}
	numbered := Number(it.Solution)
	var b strings.Builder
	err := t.Execute(&b, TemplateData{Suite: it.Task.Suite, TaskID: it.Task.ID, Prompt: it.Task.Prompt,
		Solution: it.Solution, Fence: Fence(numbered), Action: it.Action, Numbered: numbered})
	if err != nil {
		return "", fmt.Errorf("render prompt: %w", err)
	}
	return b.String(), nil
}

// Number numbers the lines of s from 1, a right-aligned number of at least
// four places and two spaces before each ("   1  x"), as the reference
// shows its world model the code. Every line is numbered, an empty last
// one after a final newline too, so that Unnumber gives s back exactly.
func Number(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = fmt.Sprintf("%4d  %s", i+1, l)
	}
	return strings.Join(lines, "\n")
}

// Unnumber is the text Number numbered, or an error naming the first line
// that is not numbered in turn.
func Unnumber(s string) (string, error) {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, " ")
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if v, err := strconv.Atoi(rest[:n]); err != nil || v != i+1 || !strings.HasPrefix(rest[n:], "  ") {
			return "", fmt.Errorf("code line %d is not numbered %d", i+1, i+1)
		}
		lines[i] = rest[n+2:]
	}
	return strings.Join(lines, "\n"), nil
}

// Prompt is what ReadRequest reads back from a user message.
type Prompt struct {
	Suite    uint64
	TaskID   string
	Solution string
	// Action is the turn's action, "" for a single-shot prompt.
	Action string
}

// ReadRequest reads the task, the solution and, for a turn, the action back
// from a user message that DefaultTemplate or DefaultTurnTemplate
// rendered: the first line "Task: <id> (suite <n>)"; for a turn the line
// "Action: <action>" and the numbered code between the fence line after
// "Code (lines numbered from 1):" and the same fence; else the block after
// "Solution:".
func ReadRequest(text string) (Prompt, error) {
	m := taskLine.FindStringSubmatch(text)
	if m == nil {
		return Prompt{}, errors.New(`no line "Task: <id> (suite <n>)"`)
	}
	suite, err := strconv.ParseUint(m[2], 10, 64)
	if err != nil {
		return Prompt{}, fmt.Errorf("suite %q: %w", m[2], err)
	}
	p := Prompt{Suite: suite, TaskID: m[1]}
	if m[3] != "" {
		p.Action = m[3]
		numbered, err := fenced(text, "\n"+codeHead+"\n", codeHead)
		if err != nil {
			return Prompt{}, err
		}
		if p.Solution, err = Unnumber(numbered); err != nil {
			return Prompt{}, err
		}
		return p, nil
	}
	if p.Solution, err = fenced(text, "\nSolution:\n", "Solution:"); err != nil {
		return Prompt{}, err
	}
	return p, nil
}

const codeHead = "Code (lines numbered from 1):"

// fenced is the block between the fence line after head and the same
// fence.
func fenced(text, head, name string) (string, error) {
	i := strings.Index(text, head)
	if i < 0 {
		return "", fmt.Errorf("no line %q", name)
	}
	rest := text[i+len(head):]
	n := 0
	for n < len(rest) && rest[n] == '`' {
		n++
	}
	if n < 3 || n >= len(rest) || rest[n] != '\n' {
		return "", fmt.Errorf("no fence line of three or more backticks after %q", name)
	}
	fence := rest[:n]
	body := rest[n+1:]
	j := strings.Index(body, "\n"+fence+"\n")
	if j < 0 {
		if !strings.HasSuffix(body, "\n"+fence) {
			return "", errors.New("the solution's fenced block is not closed")
		}
		j = len(body) - len(fence) - 1
	}
	return body[:j], nil
}

// ReadPrompt reads the task and the solution back from a user message
// (ReadRequest).
func ReadPrompt(text string) (suite uint64, taskID, solution string, err error) {
	p, err := ReadRequest(text)
	return p.Suite, p.TaskID, p.Solution, err
}

// taskLine is the task's line, and the action's line right after it in a
// turn's prompt.
var taskLine = regexp.MustCompile(`(?m)^Task: (\S+) \(suite ([0-9]+)\)$(?:\nAction: (\S+)$)?`)
