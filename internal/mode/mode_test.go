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
			if !strings.Contains(err.Error(), "grpo, wm, wmrl, mix, debias, denoise") {
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
	// Structural rules every mode obeys: exactly one reward source for
	// non-anchor groups, corrections need anchors, anchors need a world model.
	for _, m := range All() {
		p := m.Pieces()
		if p.ExecuteAll == p.WorldModel {
			t.Errorf("%s: ExecuteAll %v and WorldModel %v, want exactly one", m, p.ExecuteAll, p.WorldModel)
		}
		if (p.Debias || p.Denoise) && !p.Anchors {
			t.Errorf("%s: a correction without anchors", m)
		}
		if p.Anchors && !p.WorldModel {
			t.Errorf("%s: anchors without a world model", m)
		}
	}
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
