package dockerrun

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

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

// TestHeadTail checks HeadTail against the whole stream kept in memory,
// over random writes of every size around the head and the tail, and that
// it holds no more than head + tail bytes.
func TestHeadTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		head, tail := rng.IntN(9), rng.IntN(9)
		c := NewHeadTail(head, tail)
		var all []byte
		for range rng.IntN(8) {
			p := make([]byte, rng.IntN(20))
			for i := range p {
				p[i] = byte('a' + rng.IntN(26))
			}
			if n, err := c.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			all = append(all, p...)
		}
		wantHead := all[:min(head, len(all))]
		rest := all[len(wantHead):]
		wantTail := rest[len(rest)-min(tail, len(rest)):]
		cut := int64(len(all) - len(wantHead) - len(wantTail))
		if string(c.Head()) != string(wantHead) || string(c.Tail()) != string(wantTail) || c.Cut() != cut ||
			c.Total() != int64(len(all)) {
			t.Fatalf("trial %d (head %d tail %d) %q: head %q tail %q cut %d total %d", trial, head, tail, all,
				c.Head(), c.Tail(), c.Cut(), c.Total())
		}
		want := string(wantHead) + string(wantTail)
		if cut > 0 {
			want = string(wantHead) + CutLine(cut) + string(wantTail)
		}
		if string(c.Bytes()) != want {
			t.Fatalf("trial %d: Bytes %q, want %q", trial, c.Bytes(), want)
		}
		if cap(c.ring) > tail || len(c.head) > head {
			t.Fatalf("trial %d: holds %d + %d bytes for head %d tail %d", trial, len(c.head), cap(c.ring), head, tail)
		}
	}
}

// TestHeadTailFloodMemory: 256 MiB written through a HeadTail of 1 MiB
// (64 KiB writes, as a stream copy does) allocates about its 1 MiB, not
// the flood, and keeps the flood's last bytes.
func TestHeadTailFloodMemory(t *testing.T) {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'y'
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := NewHeadTail(512<<10, 512<<10)
	for range (256 << 20) / len(chunk) {
		c.Write(chunk)
	}
	c.Write([]byte("THE-END\n"))
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("256 MiB through a 1 MiB HeadTail: %d bytes allocated", alloc)
	if alloc > 4<<20 {
		t.Errorf("%d bytes allocated for a flood of 256 MiB, want about 1 MiB", alloc)
	}
	if tail := c.Tail(); !strings.HasSuffix(string(tail), "yTHE-END\n") || c.Total() != 256<<20+8 {
		t.Errorf("tail ends %q, total %d", tail[len(tail)-16:], c.Total())
	}
}
