package backend

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/fielderr"
)

// Every bound names its field; zeros (the defaults) and the bounds pass.
func TestModelSettingsBounds(t *testing.T) {
	if err := (ModelSettings{}).Validate("policy.tinker."); err != nil {
		t.Fatalf("zeros: %v", err)
	}
	ok := ModelSettings{LoRARank: MaxLoRARank, Loss: LossPPO, Beta1: 0, Beta2: 0.999, Eps: 1, MaxTokens: MaxMaxTokens, Temperature: MaxTemperature}
	if err := ok.Validate("policy.tinker."); err != nil {
		t.Fatalf("at the bounds: %v", err)
	}
	for field, m := range map[string]ModelSettings{
		"lora_rank":   {LoRARank: -1},
		"loss":        {Loss: "cross_entropy"},
		"beta1":       {Beta1: 1},
		"beta2":       {Beta2: math.NaN()},
		"eps":         {Eps: -1e-9},
		"max_tokens":  {MaxTokens: MaxMaxTokens + 1},
		"temperature": {Temperature: math.Inf(1)},
	} {
		err := m.Validate("policy.tinker.")
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Path != "policy.tinker."+field || !strings.HasPrefix(err.Error(), "policy.tinker."+field+": ") {
			t.Errorf("%s: %v", field, err)
		}
	}
	if err := (ModelSettings{LoRARank: MaxLoRARank + 1}).Validate("policy.tinker."); err == nil {
		t.Error("lora_rank above the bound passed")
	}
}
