package isotonic

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// fitReference is the plain implementation Fit is checked against: a
// comparison sort of (x, y, w) triples, tie pooling by running weighted mean,
// then pool adjacent violators over the unique points.
func fitReference(x, y, w []float64) Map {
	type point struct{ x, y, w float64 }
	pts := make([]point, len(x))
	for i := range x {
		pts[i] = point{x[i], y[i], weight(w, i)}
	}
	slices.SortStableFunc(pts, func(a, b point) int {
		switch {
		case a.x < b.x:
			return -1
		case a.x > b.x:
			return 1
		}
		return 0
	})
	u := pts[:0]
	for _, p := range pts {
		if n := len(u); n > 0 && u[n-1].x == p.x {
			q := &u[n-1]
			sw := q.w + p.w
			q.y += (p.y - q.y) * p.w / sw
			q.w = sw
			continue
		}
		u = append(u, p)
	}
	type block struct{ lo, hi, y, w float64 }
	var bs []block
	for _, p := range u {
		b := block{p.x, p.x, p.y, p.w}
		for n := len(bs); n > 0 && bs[n-1].y >= b.y; n = len(bs) {
			prev := bs[n-1]
			sw := prev.w + b.w
			b = block{prev.lo, b.hi, (prev.y*prev.w + b.y*b.w) / sw, sw}
			bs = bs[:n-1]
		}
		bs = append(bs, b)
	}
	var m Map
	for _, b := range bs {
		m.X = append(m.X, b.lo)
		m.Y = append(m.Y, b.y)
		if b.hi != b.lo {
			m.X = append(m.X, b.hi)
			m.Y = append(m.Y, b.y)
		}
	}
	return m
}

// benchData returns n deterministic pairs shaped like WM scores against real
// scores: x in [0,1], half of it rounded to 1e-3 (ties), y a noisy monotone
// non-affine function of x.
func benchData(n int, seed uint64) (x, y []float64) {
	r := rand.New(rand.NewPCG(seed, 2))
	x = make([]float64, n)
	y = make([]float64, n)
	for i := range n {
		v := r.Float64()
		if i%2 == 0 {
			v = math.Round(v*1000) / 1000
		}
		x[i] = v
		y[i] = min(1, max(0, v*v*(3-2*v)+0.15*r.NormFloat64()))
	}
	return x, y
}

// sameMap fails unless a and b have identical knots in X and Y within tol.
func sameMap(t interface{ Fatalf(string, ...any) }, got, want Map, tol float64) {
	if !slices.Equal(got.X, want.X) {
		t.Fatalf("knot x differ: %d vs %d knots", len(got.X), len(want.X))
	}
	for i := range got.Y {
		if math.Abs(got.Y[i]-want.Y[i]) > tol {
			t.Fatalf("knot %d (x=%v): y %v, reference %v", i, got.X[i], got.Y[i], want.Y[i])
		}
	}
}

func TestPropFitMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 3000).Draw(t, "n")
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 3))
		span := []float64{1e-300, 1e-3, 1, 1e6, 1e300}[rapid.IntRange(0, 4).Draw(t, "span")]
		signed := rapid.Bool().Draw(t, "signed")
		ties := rapid.Bool().Draw(t, "ties")
		x, y := make([]float64, n), make([]float64, n)
		var w []float64
		if rapid.Bool().Draw(t, "weighted") {
			w = make([]float64, n)
		}
		for i := range n {
			v := r.Float64() * span
			if ties {
				v = float64(r.IntN(20)) * span / 20
			}
			if signed && r.IntN(2) == 0 {
				v = -v
			}
			x[i] = v
			y[i] = r.NormFloat64() + float64(i%7)
			if w != nil {
				w[i] = 0.01 + 5*r.Float64()
			}
		}
		got, err := Fit(x, y, w)
		if err != nil {
			t.Fatalf("Fit: %v", err)
		}
		sameMap(t, got, fitReference(x, y, w), 1e-12)
	})
}

func TestFitMatchesReferenceBenchData(t *testing.T) {
	x, y := benchData(20000, 7)
	got, err := Fit(x, y, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameMap(t, got, fitReference(x, y, nil), 1e-12)
}

func BenchmarkFit(b *testing.B) {
	for _, n := range []int{1e4, 1e5, 1e6} {
		x, y := benchData(n, 1)
		b.Run(sizeName(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Fit(x, y, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFitWeighted(b *testing.B) {
	n := int(1e6)
	x, y := benchData(n, 1)
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 + float64(i%3)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(x, y, w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplyAll(b *testing.B) {
	x, y := benchData(1e5, 1)
	m, err := Fit(x, y, nil)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float64, len(x))
	b.ReportAllocs()
	for b.Loop() {
		m.ApplyAll(dst, x)
	}
}

func sizeName(n int) string {
	switch n {
	case 1e4:
		return "n=1e4"
	case 1e5:
		return "n=1e5"
	case 1e6:
		return "n=1e6"
	}
	return "n=other"
}

func TestSortKeyOrder(t *testing.T) {
	give := []float64{
		math.Inf(-1), -math.MaxFloat64, -1e300, -1, -math.SmallestNonzeroFloat64,
		math.Copysign(0, -1), 0, math.SmallestNonzeroFloat64, 1e-300, 0.001, 0.5,
		math.Nextafter(0.5, 1), 1, math.MaxFloat64, math.Inf(1),
	}
	for i, v := range give {
		if got := keyValue(sortKey(v)); got != v {
			t.Errorf("keyValue(sortKey(%v)) = %v", v, got)
		}
		if i == 0 {
			continue
		}
		a, b := sortKey(give[i-1]), sortKey(v)
		if give[i-1] == v && a != b {
			t.Errorf("sortKey(%v) = %x, sortKey(%v) = %x, want equal", give[i-1], a, v, b)
		}
		if give[i-1] < v && a >= b {
			t.Errorf("sortKey(%v) = %x not below sortKey(%v) = %x", give[i-1], a, v, b)
		}
	}
}

func TestFitRadixSpecialValues(t *testing.T) {
	specials := []float64{
		-math.MaxFloat64, -1e300, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
		math.SmallestNonzeroFloat64, 1e-310, 1e-3, 0.5, 1, 1e300, math.MaxFloat64,
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{radixMin - 1, radixMin, 5000} {
		x, y, w := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range n {
			if r.IntN(3) == 0 {
				x[i] = specials[r.IntN(len(specials))]
			} else {
				x[i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10))
			}
			y[i] = r.Float64() + float64(i%5)
			w[i] = 0.5 + r.Float64()
		}
		for _, ww := range [][]float64{nil, w} {
			got, err := Fit(x, y, ww)
			if err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("n=%d: Validate: %v", n, err)
			}
			sameMap(t, got, fitReference(x, y, ww), 1e-12)
		}
		// Descending input takes the radix path with every key moving.
		slices.SortFunc(x, func(a, b float64) int { return -cmp.Compare(a, b) })
		got, err := Fit(x, y, nil)
		if err != nil {
			t.Fatalf("n=%d descending: %v", n, err)
		}
		sameMap(t, got, fitReference(x, y, nil), 1e-12)
	}
}

func TestFitOverflowIsAnError(t *testing.T) {
	_, err := Fit([]float64{1, 2}, []float64{math.MaxFloat64, 1}, []float64{4, 1})
	if err == nil || !strings.Contains(err.Error(), "fit overflowed") {
		t.Fatalf("error = %v, want fit overflowed", err)
	}
}
