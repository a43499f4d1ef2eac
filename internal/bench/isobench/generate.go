package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
)

// generate returns n deterministic (WM score, real score) pairs, both in
// [0,1]. A latent quality u is uniform; the WM score is u plus noise, clamped
// to [0,1] (so 0 and 1 repeat), rounded to 1e-3 for half of the points (a
// coarse judge: many ties) and to a 2^-40 grid otherwise; the real score is
// a logistic (monotone, non-affine) function of u plus noise, clamped.
func generate(n int, seed uint64) (x, y []float64) {
	r := rand.New(rand.NewPCG(seed, 0x150b))
	x = make([]float64, n)
	y = make([]float64, n)
	for i := range n {
		u := r.Float64()
		s := min(1, max(0, u+0.08*r.NormFloat64()))
		if r.IntN(2) == 0 {
			s = math.Round(s*1e3) / 1e3
		} else {
			s = math.Round(s*(1<<40)) / (1 << 40)
		}
		x[i] = s
		y[i] = min(1, max(0, 1/(1+math.Exp(-8*(u-0.5)))+0.1*r.NormFloat64()))
	}
	return x, y
}

func writeFloats(path string, v []float64) error {
	b := make([]byte, 8*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readFloats(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("read %s: %d bytes is not a whole number of float64", path, len(b))
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}
