package mode

import (
	"encoding"
	"fmt"
	"strings"
)

// Mode is a training mode. The zero value is not a valid mode; obtain one
// from Parse, a constant, or JSON/text decoding (which validates).
type Mode string

// The seven modes.
const (
	GRPO    Mode = "grpo"
	WM      Mode = "wm"
	WMRL    Mode = "wmrl"
	Mix     Mode = "mix"
	Debias  Mode = "debias"
	Denoise Mode = "denoise"
	// Anchor is the control of wmrl: GRPO on its anchor groups alone, at
	// the same number of executions, without the world model.
	Anchor Mode = "anchor"
)

var (
	_ fmt.Stringer             = GRPO
	_ encoding.TextMarshaler   = GRPO
	_ encoding.TextUnmarshaler = (*Mode)(nil)
)

// All returns the seven modes in a fixed order.
func All() []Mode {
	return []Mode{GRPO, WM, WMRL, Mix, Debias, Denoise, Anchor}
}

// Names returns the names of All's modes, in its order.
func Names() []string {
	names := make([]string, 0, 7)
	for _, m := range All() {
		names = append(names, string(m))
	}
	return names
}

func validList() string { return strings.Join(Names(), ", ") }

// Parse returns the mode named s (exact, lowercase). The error lists the
// valid modes.
func Parse(s string) (Mode, error) {
	m := Mode(s)
	if err := m.Validate(); err != nil {
		return "", err
	}
	return m, nil
}

// Validate reports whether m is one of the seven modes.
func (m Mode) Validate() error {
	switch m {
	case GRPO, WM, WMRL, Mix, Debias, Denoise, Anchor:
		return nil
	}
	return fmt.Errorf("unknown mode %q (valid: %s)", string(m), validList())
}

// String returns the mode's name.
func (m Mode) String() string { return string(m) }

// MarshalText encodes a valid mode as its name; JSON uses it too.
func (m Mode) MarshalText() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return []byte(m), nil
}

// UnmarshalText decodes and validates a mode name; JSON uses it too.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Set parses s into m, so a *Mode can serve as a command-line flag value.
func (m *Mode) Set(s string) error { return m.UnmarshalText([]byte(s)) }

// Type names the flag value type.
func (m *Mode) Type() string { return "mode" }

// Pieces says which parts of the method a mode switches on.
type Pieces struct {
	// WorldModel: trajectories are scored by the world model.
	WorldModel bool `json:"world_model"`
	// Anchors: a fraction of groups is also really executed (anchor groups).
	Anchors bool `json:"anchors"`
	// ExecuteAll: every group is really executed (plain GRPO).
	ExecuteAll bool `json:"execute_all"`
	// Debias: world-model scores are mapped through the fitted isotonic map.
	Debias bool `json:"debias"`
	// Denoise: anchor trajectories are weighted by ρ in the fused update.
	Denoise bool `json:"denoise"`
	// AnchorsOnly: only the anchor groups are trained on; the other groups
	// are sampled but neither scored nor executed, and left out of the
	// update (excluded, not ungraded).
	AnchorsOnly bool `json:"anchors_only,omitempty"`
}

// Pieces returns the pieces m switches on. It panics on an invalid mode, a
// caller bug: modes are validated where they are read.
func (m Mode) Pieces() Pieces {
	switch m {
	case GRPO:
		return Pieces{ExecuteAll: true}
	case WM:
		return Pieces{WorldModel: true}
	case WMRL:
		return Pieces{WorldModel: true, Anchors: true, Debias: true, Denoise: true}
	case Mix:
		return Pieces{WorldModel: true, Anchors: true}
	case Debias:
		return Pieces{WorldModel: true, Anchors: true, Debias: true}
	case Denoise:
		return Pieces{WorldModel: true, Anchors: true, Denoise: true}
	case Anchor:
		return Pieces{Anchors: true, AnchorsOnly: true}
	}
	panic("mode: Pieces of " + m.Validate().Error())
}
