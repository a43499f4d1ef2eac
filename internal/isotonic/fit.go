package isotonic

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Fit returns the weighted isotonic least-squares fit of y on x: the
// non-decreasing step values that minimise sum w_i (y_i - f(x_i))^2.
// Points with equal x are pooled first (weighted mean of y, summed weight).
// w may be nil for unit weights. The sort is a radix sort on the bits of x,
// so the fit is linear in n; the returned knots keep only the first and last
// x of each constant block, which leaves predictions unchanged.
func Fit(x, y, w []float64) (Map, error) {
	if err := checkInput(x, y, w); err != nil {
		return Map{}, err
	}
	if w == nil {
		es := make([]item[float64], len(x))
		for i := range es {
			es[i] = item[float64]{k: sortKey(x[i]), v: y[i]}
		}
		return fitUnit(sortItems(es))
	}
	es := make([]item[yw], len(x))
	for i := range es {
		es[i] = item[yw]{k: sortKey(x[i]), v: yw{y[i], w[i]}}
	}
	return fitWeighted(sortItems(es))
}

// item is one point of a fit: the order-preserving key of x (sortKey) and a
// payload, y alone for unit weights (16 bytes move through the sort instead
// of 24) or y with its weight.
type item[P any] struct {
	k uint64
	v P
}

type yw struct{ y, w float64 }

// sortKey maps x to a key whose unsigned order is the numeric order of x,
// with -0 and +0 mapped to the same key.
func sortKey(x float64) uint64 {
	if x == 0 {
		x = 0
	}
	b := math.Float64bits(x)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// keyValue inverts sortKey.
func keyValue(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// radixMin is the size below which a comparison sort beats the radix sort.
const radixMin = 256

// sortItems sorts es stably by key and returns the sorted slice, which is es
// itself or a new slice of the same length. Stability keeps the order in which
// tied points are pooled, so results do not depend on the sort used.
func sortItems[P any](es []item[P]) []item[P] {
	sorted := true
	for i := 1; i < len(es) && sorted; i++ {
		sorted = es[i-1].k <= es[i].k
	}
	switch {
	case sorted:
		return es
	case len(es) < radixMin:
		slices.SortStableFunc(es, func(a, b item[P]) int { return cmp.Compare(a.k, b.k) })
		return es
	}
	// LSD radix sort, one byte per pass; a pass whose byte is the same for
	// every key (common: the sign and exponent of scores in [0,1]) is skipped.
	var hist [8][256]int
	for i := range es {
		k := es[i].k
		for d := range 8 {
			hist[d][byte(k>>(8*d))]++
		}
	}
	src, dst := es, make([]item[P], len(es))
	for d := range 8 {
		h := &hist[d]
		shift := 8 * uint(d)
		if h[byte(src[0].k>>shift)] == len(src) {
			continue
		}
		var off [256]int
		sum := 0
		for b, c := range h {
			off[b] = sum
			sum += c
		}
		for _, e := range src {
			b := byte(e.k >> shift)
			dst[off[b]] = e
			off[b]++
		}
		src, dst = dst, src
	}
	return src
}

// fitUnit pools ties and fits unit-weight items sorted by key.
func fitUnit(es []item[float64]) (Map, error) {
	var bs []block
	for i := 0; i < len(es); {
		first, k := i, es[i].k
		var sy float64
		for ; i < len(es) && es[i].k == k; i++ {
			sy += es[i].v
		}
		sw := float64(i - first)
		bs = push(bs, block{first: first, last: i - 1, sy: sy, sw: sw, y: sy / sw})
	}
	return knots(bs, es)
}

// fitWeighted pools ties and fits weighted items sorted by key.
func fitWeighted(es []item[yw]) (Map, error) {
	var bs []block
	for i := 0; i < len(es); {
		first, k := i, es[i].k
		var sy, sw float64
		for ; i < len(es) && es[i].k == k; i++ {
			sy += es[i].v.w * es[i].v.y
			sw += es[i].v.w
		}
		bs = push(bs, block{first: first, last: i - 1, sy: sy, sw: sw, y: sy / sw})
	}
	return knots(bs, es)
}

// block is a run of sorted items es[first..last] fitted by one value: the
// weighted sum of y, the total weight and their ratio y.
type block struct {
	first, last int
	sy, sw, y   float64
}

// push adds b on top of the pool-adjacent-violators stack bs, whose block
// means strictly increase upwards, merging it with the blocks below while
// their mean is not lower, and returns the new stack.
func push(bs []block, b block) []block {
	n := len(bs)
	for ; n > 0 && bs[n-1].y >= b.y; n-- {
		b.first = bs[n-1].first
		b.sy += bs[n-1].sy
		b.sw += bs[n-1].sw
		b.y = b.sy / b.sw
	}
	return append(bs[:n], b)
}

// knots turns the blocks into a Map, keeping the first and last x of each.
func knots[P any](bs []block, es []item[P]) (Map, error) {
	m := Map{X: make([]float64, 0, 2*len(bs)), Y: make([]float64, 0, 2*len(bs))}
	for _, b := range bs {
		if !finite(b.y) {
			return Map{}, fmt.Errorf("fit overflowed: weighted sums of y are not finite")
		}
		lo, hi := es[b.first].k, es[b.last].k
		m.X = append(m.X, keyValue(lo))
		m.Y = append(m.Y, b.y)
		if hi != lo {
			m.X = append(m.X, keyValue(hi))
			m.Y = append(m.Y, b.y)
		}
	}
	return m, nil
}
