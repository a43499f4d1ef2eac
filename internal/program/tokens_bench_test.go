package program

import "testing"

// BenchmarkLegal measures the grammar mask on a mid-length prefix, as a
// policy calls it once per sampled token.
func BenchmarkLegal(b *testing.B) {
	p, err := Parse("standardize | clip z=3 | gbt trees=100 depth=3 lr=0.1")
	if err != nil {
		b.Fatal(err)
	}
	toks, err := Encode(p)
	if err != nil {
		b.Fatal(err)
	}
	prefix := toks[:6]
	for b.Loop() {
		Legal(prefix)
	}
}
