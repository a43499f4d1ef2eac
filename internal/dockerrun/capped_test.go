package dockerrun

import "testing"

func TestCapped(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		give      []string
		want      string
		wantTotal int64
		wantTrunc bool
	}{
		{name: "fits", max: 8, give: []string{"ab", "cd"}, want: "abcd", wantTotal: 4},
		{name: "exactly", max: 4, give: []string{"ab", "cd"}, want: "abcd", wantTotal: 4},
		{name: "across writes", max: 4, give: []string{"ab", "cde", "fg"}, want: "abcd", wantTotal: 7, wantTrunc: true},
		{name: "one flood", max: 3, give: []string{"abcdefgh"}, want: "abc", wantTotal: 8, wantTrunc: true},
		{name: "after full", max: 2, give: []string{"ab", "", "c"}, want: "ab", wantTotal: 3, wantTrunc: true},
		{name: "keeps nothing", max: 0, give: []string{"x"}, want: "", wantTotal: 1, wantTrunc: true},
		{name: "nothing written", max: 4, want: ""},
	}
	for _, tt := range tests {
		c := NewCapped(tt.max)
		for _, s := range tt.give {
			if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("%s: Write(%q) = %d, %v", tt.name, s, n, err)
			}
		}
		if c.String() != tt.want || string(c.Bytes()) != tt.want || c.Total() != tt.wantTotal || c.Truncated() != tt.wantTrunc {
			t.Errorf("%s: kept %q, total %d, truncated %v; want %q, %d, %v", tt.name, c.String(), c.Total(), c.Truncated(),
				tt.want, tt.wantTotal, tt.wantTrunc)
		}
	}
}
