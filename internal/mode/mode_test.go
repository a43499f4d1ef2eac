package mode

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		give    string
		want    Mode
		wantErr bool
	}{
		{give: "grpo", want: GRPO},
		{give: "wm", want: WM},
		{give: "wmrl", want: WMRL},
		{give: "mix", want: Mix},
		{give: "debias", want: Debias},
		{give: "denoise", want: Denoise},
		{give: "anchor", want: Anchor},
		{give: "anchors", wantErr: true},
		{give: "", wantErr: true},
		{give: "WMRL", wantErr: true},
		{give: " wmrl", wantErr: true},
		{give: "ppo", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.give)
		if tt.wantErr {
			if err == nil {
				t.Errorf("Parse(%q) = %q, want an error", tt.give, got)
				continue
			}
			if !strings.Contains(err.Error(), "grpo, wm, wmrl, mix, debias, denoise, anchor") {
				t.Errorf("Parse(%q) error %q does not list the modes", tt.give, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tt.give, got, err, tt.want)
		}
	}
}

func TestPieces(t *testing.T) {
	tests := []struct {
		give Mode
		want Pieces
	}{
		{give: GRPO, want: Pieces{ExecuteAll: true}},
		{give: WM, want: Pieces{WorldModel: true}},
		{give: WMRL, want: Pieces{WorldModel: true, Anchors: true, Debias: true, Denoise: true}},
		{give: Mix, want: Pieces{WorldModel: true, Anchors: true}},
		{give: Debias, want: Pieces{WorldModel: true, Anchors: true, Debias: true}},
		{give: Denoise, want: Pieces{WorldModel: true, Anchors: true, Denoise: true}},
		{give: Anchor, want: Pieces{Anchors: true, AnchorsOnly: true}},
	}
	if len(tests) != len(All()) {
		t.Fatalf("table covers %d modes, All has %d", len(tests), len(All()))
	}
	for _, tt := range tests {
		if got := tt.give.Pieces(); got != tt.want {
			t.Errorf("%s.Pieces() = %+v, want %+v", tt.give, got, tt.want)
		}
	}
}

func TestPiecesConsistent(t *testing.T) {
	// Structural rules every mode obeys: exactly one fate for non-anchor
	// groups (executed, scored by the world model, or left out), corrections
	// need anchors and a world model, anchors need a world model unless they
	// are all that is trained on.
	for _, m := range All() {
		p := m.Pieces()
		if n := btoi(p.ExecuteAll) + btoi(p.WorldModel) + btoi(p.AnchorsOnly); n != 1 {
			t.Errorf("%s: ExecuteAll %v, WorldModel %v, AnchorsOnly %v, want exactly one", m, p.ExecuteAll,
				p.WorldModel, p.AnchorsOnly)
		}
		if (p.Debias || p.Denoise) && (!p.Anchors || !p.WorldModel) {
			t.Errorf("%s: a correction without anchors and a world model", m)
		}
		if p.Anchors && !p.WorldModel && !p.AnchorsOnly {
			t.Errorf("%s: anchors without a world model", m)
		}
		if p.AnchorsOnly && !p.Anchors {
			t.Errorf("%s: anchors only, without anchors", m)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestPiecesPanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Mode("ppo").Pieces()
}

func TestJSON(t *testing.T) {
	type cfg struct {
		Mode Mode `json:"mode"`
	}
	for _, m := range All() {
		b, err := json.Marshal(cfg{m})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"mode":"` + string(m) + `"}`; string(b) != want {
			t.Errorf("Marshal = %s, want %s", b, want)
		}
		var back cfg
		if err := json.Unmarshal(b, &back); err != nil || back.Mode != m {
			t.Errorf("round trip of %s = %q, %v", m, back.Mode, err)
		}
	}
	var c cfg
	if err := json.Unmarshal([]byte(`{"mode":"ppo"}`), &c); err == nil {
		t.Error("unmarshal of an unknown mode succeeded")
	}
	if err := json.Unmarshal([]byte(`{"mode":7}`), &c); err == nil {
		t.Error("unmarshal of a number succeeded")
	}
	if _, err := json.Marshal(cfg{Mode("ppo")}); err == nil {
		t.Error("marshal of an unknown mode succeeded")
	}
	if _, err := json.Marshal(cfg{}); err == nil {
		t.Error("marshal of the zero mode succeeded")
	}
}

func TestSet(t *testing.T) {
	var m Mode
	if err := m.Set("debias"); err != nil || m != Debias {
		t.Errorf("Set(debias) -> %q, %v", m, err)
	}
	if err := m.Set("nope"); err == nil {
		t.Error("Set(nope) succeeded")
	}
	if m != Debias {
		t.Errorf("failed Set changed the mode to %q", m)
	}
	if m.Type() != "mode" || m.String() != "debias" {
		t.Errorf("Type %q String %q", m.Type(), m.String())
	}
}

func TestNames(t *testing.T) {
	names := Names()
	if len(names) != len(All()) {
		t.Fatalf("names %v", names)
	}
	for i, m := range All() {
		if names[i] != string(m) {
			t.Errorf("name %d = %q, want %q", i, names[i], m)
		}
	}
}

func TestPiecesJSON(t *testing.T) {
	// anchors_only is left out when false, so the pieces of the six older
	// modes encode as they did before it existed.
	b, err := json.Marshal(WMRL.Pieces())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"world_model":true,"anchors":true,"execute_all":false,"debias":true,"denoise":true}`; string(b) != want {
		t.Errorf("wmrl pieces %s, want %s", b, want)
	}
	if b, _ := json.Marshal(Anchor.Pieces()); !strings.Contains(string(b), `"anchors_only":true`) {
		t.Errorf("anchor pieces %s, want anchors_only", b)
	}
}
