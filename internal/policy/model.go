package policy

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
)

// layout locates each parameter block in the flat parameter vector. All
// matrices are row-major.
type layout struct {
	v, c, h, p int // vocabulary, card length, hidden width, positions

	wc    int // h×c     card → hidden
	b1    int // h       hidden bias
	eprev int // (v+1)×h previous token → hidden; row v is the start row
	epos  int // p×h     position → hidden
	wbag  int // v×h     bag of previous tokens → hidden (row per token)
	u     int // v×h     hidden → logits
	big   int // (v+1)×v previous token → logits (bigram); row v is the start row
	wcl   int // v×c     card → logits
	b2    int // v       logit bias
	n     int // total
}

func newLayout(cfg Config) layout {
	l := layout{v: cfg.VocabSize, c: cfg.CardDim, h: cfg.Hidden, p: cfg.MaxLen}
	off := 0
	next := func(size int) int { o := off; off += size; return o }
	l.wc = next(l.h * l.c)
	l.b1 = next(l.h)
	l.eprev = next((l.v + 1) * l.h)
	l.epos = next(l.p * l.h)
	l.wbag = next(l.v * l.h)
	l.u = next(l.v * l.h)
	l.big = next((l.v + 1) * l.v)
	l.wcl = next(l.v * l.c)
	l.b2 = next(l.v)
	l.n = off
	return l
}

// row returns row i of the block at off whose rows have width w.
func row(theta []float64, off, i, w int) []float64 {
	return theta[off+i*w : off+(i+1)*w]
}

// seqTerms holds the card-dependent terms of one sequence, computed once:
// zc = Wc·c + b1 and lc = Wcl·c + b2.
type seqTerms struct {
	zc, lc []float64
}

func (l *layout) seqTerms(theta, card []float64) seqTerms {
	st := seqTerms{zc: make([]float64, l.h), lc: make([]float64, l.v)}
	copy(st.zc, theta[l.b1:l.b1+l.h])
	copy(st.lc, theta[l.b2:l.b2+l.v])
	cv := blas64.Vector{N: l.c, Inc: 1, Data: card}
	blas64.Gemv(blas.NoTrans, 1, blas64.General{Rows: l.h, Cols: l.c, Stride: l.c, Data: theta[l.wc : l.wc+l.h*l.c]},
		cv, 1, blas64.Vector{N: l.h, Inc: 1, Data: st.zc})
	blas64.Gemv(blas.NoTrans, 1, blas64.General{Rows: l.v, Cols: l.c, Stride: l.c, Data: theta[l.wcl : l.wcl+l.v*l.c]},
		cv, 1, blas64.Vector{N: l.v, Inc: 1, Data: st.lc})
	return st
}

// hidden writes h = tanh(zc + Eprev[prev] + Epos[t] + bag) into h, where bag
// is Wbag·b_t, kept up to date by the caller.
func (l *layout) hidden(theta []float64, st seqTerms, prev, t int, bag, h []float64) {
	ep := row(theta, l.eprev, prev, l.h)
	et := row(theta, l.epos, t, l.h)
	for k := range h {
		h[k] = math.Tanh(st.zc[k] + ep[k] + et[k] + bag[k])
	}
}

// logProbs writes the log-probabilities of the legal tokens into lp
// (lp[i] belongs to legal[i]): the log-softmax of the logits over legal only.
func (l *layout) logProbs(theta []float64, st seqTerms, prev int, h []float64, legal []int, lp []float64) {
	bg := row(theta, l.big, prev, l.v)
	mx := math.Inf(-1)
	for i, j := range legal {
		z := floats.Dot(row(theta, l.u, j, l.h), h) + bg[j] + st.lc[j]
		lp[i] = z
		if z > mx {
			mx = z
		}
	}
	s := 0.0
	for _, z := range lp {
		s += math.Exp(z - mx)
	}
	lse := mx + math.Log(s)
	for i := range lp {
		lp[i] -= lse
	}
}

// stepCache is what the backward pass needs from one position.
type stepCache struct {
	prev, tok int
	legal     []int
	h         []float64 // nil when only one token was legal
	lp        []float64 // log-probabilities over legal
	lq        []float64 // reference log-probabilities over legal (KL only)
}

// forward replays tokens under theta (and ref when ref != nil), checking
// every token against the grammar. It returns the per-position caches and
// log π(tokens). Positions with a single legal token carry no probability
// mass and no gradient; their h is not computed.
func (l *layout) forward(g Grammar, theta, ref, card []float64, tokens []int) ([]stepCache, float64, error) {
	if len(card) != l.c {
		return nil, 0, fmt.Errorf("card has %d values, want %d", len(card), l.c)
	}
	if len(tokens) > l.p {
		return nil, 0, fmt.Errorf("%d tokens exceed max length %d", len(tokens), l.p)
	}
	st := l.seqTerms(theta, card)
	var rst seqTerms
	var rbag []float64
	if ref != nil {
		rst = l.seqTerms(ref, card)
		rbag = make([]float64, l.h)
	}
	bag := make([]float64, l.h)
	rh := make([]float64, l.h)
	caches := make([]stepCache, len(tokens))
	prev := l.v
	total := 0.0
	for t, tok := range tokens {
		legal := g.Legal(tokens[:t])
		at := indexOf(legal, tok)
		if at < 0 {
			return nil, 0, fmt.Errorf("token %d at position %d is not legal", tok, t)
		}
		c := stepCache{prev: prev, tok: at, legal: append([]int(nil), legal...)}
		if len(legal) > 1 {
			c.h = make([]float64, l.h)
			c.lp = make([]float64, len(legal))
			l.hidden(theta, st, prev, t, bag, c.h)
			l.logProbs(theta, st, prev, c.h, legal, c.lp)
			total += c.lp[at]
			if ref != nil {
				c.lq = make([]float64, len(legal))
				l.hidden(ref, rst, prev, t, rbag, rh)
				l.logProbs(ref, rst, prev, rh, legal, c.lq)
			}
		}
		caches[t] = c
		floats.Add(bag, row(theta, l.wbag, tok, l.h))
		if ref != nil {
			floats.Add(rbag, row(ref, l.wbag, tok, l.h))
		}
		prev = tok
	}
	return caches, total, nil
}

// klOf returns KL(p‖q) over one position's legal tokens.
func klOf(lp, lq []float64) float64 {
	kl := 0.0
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return kl
}

// backward adds to grad the gradient of a·log π(tokens) − k·Σ_t KL_t with
// respect to theta, given the caches of forward (which must have had a
// reference when k != 0). When as is not nil, position t's term is
// as[t]·log π(tokens_t) instead (a is then unused).
func (l *layout) backward(theta, card []float64, tokens []int, caches []stepCache, a float64, as []float64, k float64, grad []float64) {
	H := l.h
	dlc := make([]float64, l.v)  // Σ_t dz_t over logits (for b2 and Wcl)
	dzsum := make([]float64, H)  // Σ_t dpre_t over hidden (for b1 and Wc)
	suffix := make([]float64, H) // Σ_{t'>t} dpre_t' (for Wbag)
	dh := make([]float64, H)
	dl := make([]float64, 0, l.v)
	for t := len(caches) - 1; t >= 0; t-- {
		c := caches[t]
		// Wbag: the token at t is in the bag of every later position.
		floats.Add(row(grad, l.wbag, tokens[t], H), suffix)
		if c.h == nil {
			continue
		}
		dl = dl[:len(c.legal)]
		a := a
		if as != nil {
			a = as[t]
		}
		kl := 0.0
		if k != 0 {
			kl = klOf(c.lp, c.lq)
		}
		for i := range c.legal {
			p := math.Exp(c.lp[i])
			d := -a * p
			if i == c.tok {
				d += a
			}
			if k != 0 {
				d -= k * p * (c.lp[i] - c.lq[i] - kl)
			}
			dl[i] = d
		}
		bg := row(grad, l.big, c.prev, l.v)
		for x := range dh {
			dh[x] = 0
		}
		for i, j := range c.legal {
			d := dl[i]
			dlc[j] += d
			bg[j] += d
			floats.AddScaled(row(grad, l.u, j, H), d, c.h)
			floats.AddScaled(dh, d, row(theta, l.u, j, H))
		}
		for x := range dh {
			dh[x] *= 1 - c.h[x]*c.h[x]
		}
		floats.Add(row(grad, l.eprev, c.prev, H), dh)
		floats.Add(row(grad, l.epos, t, H), dh)
		floats.Add(dzsum, dh)
		floats.Add(suffix, dh)
	}
	floats.Add(grad[l.b1:l.b1+H], dzsum)
	floats.Add(grad[l.b2:l.b2+l.v], dlc)
	cv := blas64.Vector{N: l.c, Inc: 1, Data: card}
	blas64.Ger(1, blas64.Vector{N: H, Inc: 1, Data: dzsum}, cv,
		blas64.General{Rows: H, Cols: l.c, Stride: l.c, Data: grad[l.wc : l.wc+H*l.c]})
	blas64.Ger(1, blas64.Vector{N: l.v, Inc: 1, Data: dlc}, cv,
		blas64.General{Rows: l.v, Cols: l.c, Stride: l.c, Data: grad[l.wcl : l.wcl+l.v*l.c]})
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
