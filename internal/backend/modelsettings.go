package backend

import (
	"math"

	"github.com/wmrl/wmrl/internal/fielderr"
)

// The loss functions a language-model policy's service can be asked for
// (Tinker's names).
const (
	LossImportanceSampling = "importance_sampling"
	LossPPO                = "ppo"
)

// The upper bounds of ModelSettings.
const (
	MaxLoRARank    = 1024
	MaxMaxTokens   = 1 << 20
	MaxTemperature = 10
)

// Validate checks every field's bounds, naming the first bad one under
// prefix ("policy.tinker."). It is the one check of them: the run config
// (policy.tinker) calls it on the run's values, the Tinker adapter on its
// configuration after its defaults. A zero field means the adapter's
// default and passes (Eps and Temperature 0 too: the defaults replace
// them); BaseModel is the service's to refuse.
func (m ModelSettings) Validate(prefix string) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case m.LoRARank < 0 || m.LoRARank > MaxLoRARank:
		return fielderr.New(prefix+"lora_rank", "must be in [1,%d] (0: the default), got %d", MaxLoRARank, m.LoRARank)
	case m.Loss != "" && m.Loss != LossImportanceSampling && m.Loss != LossPPO:
		return fielderr.New(prefix+"loss", "must be %q or %q, got %q", LossImportanceSampling, LossPPO, m.Loss)
	case !finite(m.Beta1) || m.Beta1 < 0 || m.Beta1 >= 1:
		return fielderr.New(prefix+"beta1", "must be in [0,1), got %v", m.Beta1)
	case !finite(m.Beta2) || m.Beta2 < 0 || m.Beta2 >= 1:
		return fielderr.New(prefix+"beta2", "must be in [0,1), got %v", m.Beta2)
	case !finite(m.Eps) || m.Eps < 0 || m.Eps > 1:
		return fielderr.New(prefix+"eps", "must be in (0,1] (0: the default), got %v", m.Eps)
	case m.MaxTokens < 0 || m.MaxTokens > MaxMaxTokens:
		return fielderr.New(prefix+"max_tokens", "must be in [1,%d] (0: the default), got %d", MaxMaxTokens, m.MaxTokens)
	case !finite(m.Temperature) || m.Temperature < 0 || m.Temperature > MaxTemperature:
		return fielderr.New(prefix+"temperature", "must be in (0,%d] (0: the default), got %v", MaxTemperature, m.Temperature)
	}
	return nil
}
