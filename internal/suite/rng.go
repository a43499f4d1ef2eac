package suite

import "math"

// rng is a small xoshiro256** generator. It is written out here, rather than
// taken from math/rand/v2, so that the suite's data stay bit-for-bit the same
// across Go releases: the suite hash depends on every generated number.
type rng struct{ s [4]uint64 }

func newRNG(seed uint64) *rng {
	r := &rng{}
	x := seed
	for i := range r.s {
		// splitmix64 expands the seed into the four state words.
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		r.s[i] = z ^ (z >> 31)
	}
	return r
}

func rotl(x uint64, k uint) uint64 { return (x << k) | (x >> (64 - k)) }

func (r *rng) uint64() uint64 {
	s := &r.s
	out := rotl(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = rotl(s[3], 45)
	return out
}

// float64 returns a uniform number in [0, 1).
func (r *rng) float64() float64 { return float64(r.uint64()>>11) / (1 << 53) }

// uniform returns a uniform number in [lo, hi).
func (r *rng) uniform(lo, hi float64) float64 { return lo + (hi-lo)*r.float64() }

// logUniform returns a number in [lo, hi) whose logarithm is uniform.
func (r *rng) logUniform(lo, hi float64) float64 {
	return math.Exp(r.uniform(math.Log(lo), math.Log(hi)))
}

// intn returns a uniform integer in [0, n); n must be positive.
func (r *rng) intn(n int) int {
	if n <= 0 {
		panic("suite: intn with non-positive n")
	}
	// Rejection sampling removes the modulo bias.
	un := uint64(n)
	limit := math.MaxUint64 - math.MaxUint64%un
	for {
		v := r.uint64()
		if v < limit {
			return int(v % un)
		}
	}
}

// between returns a uniform integer in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// norm returns a standard normal number (Box-Muller, one value per call).
func (r *rng) norm() float64 {
	u1 := r.float64()
	for u1 == 0 {
		u1 = r.float64()
	}
	u2 := r.float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// perm returns a random permutation of 0..n-1 (Fisher-Yates).
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// sign returns -1 or +1 with equal probability.
func (r *rng) sign() float64 {
	if r.uint64()&1 == 0 {
		return -1
	}
	return 1
}
