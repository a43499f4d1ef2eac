package seed

// golden is 2^64 divided by the golden ratio, the splitmix64 increment.
const golden uint64 = 0x9e3779b97f4a7c15

// start is the initial fold state (the first 64 bits of the fractional part
// of sqrt(2), an arbitrary fixed constant that is not zero).
const start uint64 = 0x6a09e667f3bcc908

// Mix is the splitmix64 finaliser: a bijection on uint64 in which every input
// bit affects every output bit.
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Derive hashes parts, in order, to one seed:
//
//	h = start; for each part p: h = Mix(h ^ Mix(p + golden))
//
// followed by a final Mix of h with the number of parts, so that Derive(a)
// and Derive(a, b) never coincide by construction of the fold. Typical use is
// Derive(runSeed, step, group, sample).
func Derive(parts ...uint64) uint64 {
	h := start
	for _, p := range parts {
		h = Mix(h ^ Mix(p+golden))
	}
	return Mix(h + uint64(len(parts))*golden)
}

// FNV-1a 64-bit parameters.
const (
	fnvOffset uint64 = 0xcbf29ce484222325
	fnvPrime  uint64 = 0x100000001b3
)

// String hashes s (its UTF-8 bytes) with 64-bit FNV-1a. It equals
// hash/fnv.New64a over the same bytes.
func String(s string) uint64 {
	h := fnvOffset
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// Unit maps a hash to a float64 in [0, 1) using its top 53 bits, so every
// value is an exact multiple of 2^-53.
func Unit(h uint64) float64 {
	return float64(h>>11) * (1.0 / (1 << 53))
}
