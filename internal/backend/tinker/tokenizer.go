package tinker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

// Tokenizer turns a task into prompt token ids and a completion's token ids
// into its text. A remote LLM needs its own (a Hugging Face tokenizer.json
// adapter satisfies this interface); BuiltinTokenizer is the built-in
// policy's.
type Tokenizer interface {
	Prompt(t backend.Task) ([]int, error)
	Decode(completion []int) (string, error)
}

// BuiltinTokenizer is the token space of the built-in policy served over
// the Tinker API (internal/serve/tinkerserve): ids 0..255 are the bytes of
// the prompt text (PromptText: the UTF-8 bytes of the task's prompt, or of
// "suite/id" when it is empty, as for the built-in suite), and id
// ProgramTokenOffset+k is program token k (internal/program), the policy's
// own vocabulary. A completion is program tokens ending with EOS; its text
// is the program's canonical form.
type BuiltinTokenizer struct{}

// ProgramTokenOffset is the id of program token 0 in BuiltinTokenizer's
// space.
const ProgramTokenOffset = 256

// PromptText is the text BuiltinTokenizer encodes for a task.
func PromptText(t backend.Task) string {
	if t.Prompt != "" {
		return t.Prompt
	}
	return strconv.FormatUint(t.Suite, 10) + "/" + t.ID
}

// ParseTaskPrompt inverts PromptText for a task with an empty prompt:
// "suite/id".
func ParseTaskPrompt(text string) (suite uint64, id string, err error) {
	s, id, ok := strings.Cut(text, "/")
	if !ok || id == "" {
		return 0, "", fmt.Errorf("prompt %q: want suite/id", text)
	}
	suite, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("prompt %q: suite: want an unsigned integer", text)
	}
	return suite, id, nil
}

// Prompt returns the bytes of PromptText (tokenizer.Bytes).
func (BuiltinTokenizer) Prompt(t backend.Task) ([]int, error) {
	return tokenizer.Bytes{}.Encode(PromptText(t))
}

// DecodePrompt inverts Prompt: it fails on an id that is not a byte.
func DecodePrompt(ids []int) (string, error) {
	s, err := tokenizer.Bytes{}.Decode(ids)
	if err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	return s, nil
}

// Decode returns the canonical text of the program whose tokens, shifted by
// ProgramTokenOffset, are completion.
func (BuiltinTokenizer) Decode(completion []int) (string, error) {
	toks, err := ProgramTokens(completion)
	if err != nil {
		return "", err
	}
	p, err := program.Decode(toks)
	if err != nil {
		return "", fmt.Errorf("decode program: %w", err)
	}
	return p.String(), nil
}

// ProgramTokens shifts ids back to program tokens.
func ProgramTokens(ids []int) ([]int, error) {
	n := program.VocabSize()
	out := make([]int, len(ids))
	for i, id := range ids {
		k := id - ProgramTokenOffset
		if k < 0 || k >= n {
			return nil, fmt.Errorf("completion token %d is %d: want %d..%d", i, id, ProgramTokenOffset, ProgramTokenOffset+n-1)
		}
		out[i] = k
	}
	return out, nil
}

// ObservationEncoder is a Tokenizer that can put an observation (the text
// turns.Render made of an environment's answer) into a multi-turn
// trajectory's token sequence: prompt, action 1, observation 1, action 2,
// ... (docs/design.md, "Multi-turn trajectories"). A Tokenizer without it
// samples and trains single-shot trajectories only.
type ObservationEncoder interface {
	Observation(text string) ([]int, error)
}

// Observation returns the bytes of the observation's text (ids 0-255, as
// a prompt's): the built-in server tells an observation from an action by
// its ids (program tokens are ProgramTokenOffset and up).
func (BuiltinTokenizer) Observation(text string) ([]int, error) {
	if text == "" {
		return nil, fmt.Errorf("empty observation")
	}
	return tokenizer.Bytes{}.Encode(text)
}
