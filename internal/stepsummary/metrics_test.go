package stepsummary

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// names are the metric names stored since steps had metrics (the keys of
// the former StepMetrics.Map): recorded histories and stored rows use them.
var names = []string{
	"groups", "samples", "anchor_groups", "anchor_fraction", "trajectories", "executed", "ungraded",
	"graded", "mean_reward", "mean_env", "mean_wm", "rho", "anchor_share", "skipped_groups",
	"calibration_pairs", "bias_before", "bias_after", "objective", "kl", "grad_norm",
	"cpu_seconds", "wall_seconds",
}

func TestJSONNames(t *testing.T) {
	b, err := json.Marshal(Step{})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]float64
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(keys, want) {
		t.Errorf("JSON names %v, want %v", keys, want)
	}
}

func TestDecodeOldMap(t *testing.T) {
	// A row of the former name → number form: counts as float64, keys sorted.
	old := map[string]float64{"groups": 4, "anchor_groups": 1, "executed": 8, "rho": 2.5, "cpu_seconds": 1.5}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var got Step
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := (Step{Groups: 4, AnchorGroups: 1, Executed: 8, Rho: 2.5, CPUSeconds: 1.5}); got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

// TestValidate sets each float metric in turn to NaN and ±Inf.
func TestValidate(t *testing.T) {
	if err := (Step{Rho: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(Step{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Float64 {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			var m Step
			reflect.ValueOf(&m).Elem().Field(i).SetFloat(v)
			if err := m.Validate(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s = %v: Validate() = %v, want an error naming it", name, v, err)
			}
		}
	}
}
