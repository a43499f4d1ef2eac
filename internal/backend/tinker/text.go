package tinker

import (
	"errors"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/prompt"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

// TextTokenizer is the Tokenizer of a language model: a task's prompt is
// the template rendered for it and encoded with the model's own tokenizer
// (internal/tokenizer: its tokenizer.json), and a completion's text is the
// solution taken out of the decoded completion (prompt.Extract: the last
// fenced block for Python, the whole text for the built-in language). A
// completion holding no solution decodes to "", which the grader scores as
// an invalid program (malformed), never as an error.
type TextTokenizer struct {
	Tok      tokenizer.Tokenizer
	Template *prompt.Template
	// Language is the solutions' language: "python" or "builtin".
	Language string
}

var _ Tokenizer = TextTokenizer{}

// Prompt renders and encodes the task's prompt.
func (t TextTokenizer) Prompt(task backend.Task) ([]int, error) {
	text, err := t.Template.Render(prompt.Data{Suite: task.Suite, ID: task.ID, Description: task.Prompt, Language: t.Language})
	if err != nil {
		return nil, err
	}
	return t.Tok.Encode(text)
}

// Decode returns the solution in the completion.
func (t TextTokenizer) Decode(completion []int) (string, error) {
	text, err := t.Tok.Decode(completion)
	if err != nil {
		return "", err
	}
	sol, _ := prompt.Extract(text, t.Language)
	return sol, nil
}

// Observation encodes an observation's text with the model's tokenizer,
// as it is (no chat markup: a template's framing applies to the prompt
// only).
func (t TextTokenizer) Observation(text string) ([]int, error) {
	if text == "" {
		return nil, errors.New("empty observation")
	}
	return t.Tok.Encode(text)
}
