package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Grammar is what the policy needs from a token language.
type Grammar interface {
	// Vocab returns the token strings indexed by token id.
	Vocab() []string
	// EOS is the token that ends a sequence.
	EOS() int
	// MaxLen is the longest legal sequence, EOS included.
	MaxLen() int
	// Legal returns the token ids allowed after prefix, in a fixed order,
	// without duplicates; nil when prefix cannot be continued. The policy
	// does not modify the returned slice.
	Legal(prefix []int) []int
}

// Coster is an optional extension of Grammar used by Init when
// Config.SimpleBias > 0: Cost(tok) is how much choosing tok adds to a
// program's complexity (for example 1 for a preprocessing step, 0 for the
// model or EOS).
type Coster interface {
	Cost(tok int) float64
}

// vocabHash fingerprints a vocabulary (ids and strings), so that a checkpoint
// is never loaded against a grammar whose token ids mean something else.
func vocabHash(vocab []string) [32]byte {
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(vocab)))
	h.Write(n[:])
	for _, s := range vocab {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// checkGrammar checks that g matches the configuration.
func checkGrammar(g Grammar, cfg Config) error {
	if g == nil {
		return fmt.Errorf("grammar: nil")
	}
	if n := len(g.Vocab()); n != cfg.VocabSize {
		return fmt.Errorf("grammar has %d tokens, config %d", n, cfg.VocabSize)
	}
	if e := g.EOS(); e < 0 || e >= cfg.VocabSize {
		return fmt.Errorf("grammar eos %d out of range [0, %d)", e, cfg.VocabSize)
	}
	if g.MaxLen() > cfg.MaxLen {
		return fmt.Errorf("grammar max length %d exceeds config %d", g.MaxLen(), cfg.MaxLen)
	}
	return nil
}
