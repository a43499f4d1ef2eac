package testenv

import (
	"testing"

	"github.com/wmrl/wmrl/internal/worldmodel"
)

// SmallBase returns a frozen world model fitted on SmallSuite (6 samples a
// task), marshalled and loaded again as a worker loads one. The default
// model was fitted on the full suite, whose training data takes minutes to
// regenerate; a refresh of this one regenerates its data in a fraction of a
// second. Each call fits a new model.
func SmallBase(t testing.TB) *worldmodel.Model {
	t.Helper()
	s, err := SmallSuite()
	if err != nil {
		t.Fatal(err)
	}
	cfg := worldmodel.DefaultFitConfig()
	cfg.SamplesPerTask = 6
	m, _, err := worldmodel.Fit(t.Context(), s, cfg, worldmodel.ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if m, err = worldmodel.Load(b); err != nil {
		t.Fatal(err)
	}
	return m
}
