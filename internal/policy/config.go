package policy

import (
	"errors"
	"fmt"
	"math"
)

// Config fixes the model's shape and the optimiser. It is stored in every
// checkpoint.
type Config struct {
	// VocabSize is the number of tokens; it must equal len(Grammar.Vocab()).
	VocabSize int `json:"vocab_size"`
	// CardDim is the length of every card vector.
	CardDim int `json:"card_dim"`
	// MaxLen is the longest token sequence, EOS included.
	MaxLen int `json:"max_len"`
	// Hidden is the width of the hidden layer.
	Hidden int `json:"hidden"`

	// LearningRate, Beta1, Beta2 and AdamEps are Adam's hyperparameters.
	LearningRate float64 `json:"learning_rate"`
	Beta1        float64 `json:"beta1"`
	Beta2        float64 `json:"beta2"`
	AdamEps      float64 `json:"adam_eps"`
	// KLCoef is β, the weight of the KL penalty to the initial policy
	// (0 turns it off).
	KLCoef float64 `json:"kl_coef"`
	// ClipNorm, when positive, rescales a gradient whose Euclidean norm
	// exceeds it to that norm (0 turns clipping off).
	ClipNorm float64 `json:"clip_norm"`

	// InitScale scales the random initial weights (standard deviation
	// InitScale/sqrt(fan-in)).
	InitScale float64 `json:"init_scale"`
	// SimpleBias, when positive, biases the initial policy toward simple
	// programs: each token's initial logit bias is −SimpleBias·Cost(token)
	// when the grammar is a Coster, else the EOS bias is +SimpleBias.
	SimpleBias float64 `json:"simple_bias"`
}

// DefaultConfig returns the default configuration for a grammar and a card
// length.
func DefaultConfig(g Grammar, cardDim int) Config {
	return Config{
		VocabSize:    len(g.Vocab()),
		CardDim:      cardDim,
		MaxLen:       g.MaxLen(),
		Hidden:       32,
		LearningRate: 0.01,
		Beta1:        0.9,
		Beta2:        0.999,
		AdamEps:      1e-8,
		KLCoef:       0,
		ClipNorm:     0,
		InitScale:    0.5,
		SimpleBias:   0,
	}
}

// maxDim bounds every dimension so that the parameter count stays small and
// a corrupted checkpoint cannot ask for a huge allocation.
const maxDim = 1 << 12

// Validate checks that the configuration describes a usable model.
func (c Config) Validate() error {
	dims := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"card_dim", c.CardDim}, {"max_len", c.MaxLen}, {"hidden", c.Hidden},
	}
	for _, d := range dims {
		if d.v < 1 || d.v > maxDim {
			return fmt.Errorf("%s %d: want 1..%d", d.name, d.v, maxDim)
		}
	}
	if c.VocabSize < 2 {
		return errors.New("vocab_size: want at least 2 tokens")
	}
	fl := []struct {
		name string
		v    float64
	}{
		{"learning_rate", c.LearningRate}, {"beta1", c.Beta1}, {"beta2", c.Beta2}, {"adam_eps", c.AdamEps},
		{"kl_coef", c.KLCoef}, {"clip_norm", c.ClipNorm}, {"init_scale", c.InitScale}, {"simple_bias", c.SimpleBias},
	}
	for _, f := range fl {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s: not finite", f.name)
		}
	}
	switch {
	case c.LearningRate <= 0:
		return fmt.Errorf("learning_rate %v: want > 0", c.LearningRate)
	case c.Beta1 < 0 || c.Beta1 >= 1:
		return fmt.Errorf("beta1 %v: want in [0, 1)", c.Beta1)
	case c.Beta2 < 0 || c.Beta2 >= 1:
		return fmt.Errorf("beta2 %v: want in [0, 1)", c.Beta2)
	case c.AdamEps <= 0:
		return fmt.Errorf("adam_eps %v: want > 0", c.AdamEps)
	case c.KLCoef < 0:
		return fmt.Errorf("kl_coef %v: want >= 0", c.KLCoef)
	case c.ClipNorm < 0:
		return fmt.Errorf("clip_norm %v: want >= 0", c.ClipNorm)
	case c.InitScale < 0:
		return fmt.Errorf("init_scale %v: want >= 0", c.InitScale)
	case c.SimpleBias < 0:
		return fmt.Errorf("simple_bias %v: want >= 0", c.SimpleBias)
	}
	return nil
}
