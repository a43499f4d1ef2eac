package worldmodel

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/suite"
)

// A refreshed model regenerates its base's training data exactly (refitting
// it alone gives the base back), is a pure function of its inputs, records
// its base, and learns from the run's executions.
func TestRefit(t *testing.T) {
	if testing.Short() {
		t.Skip("real executions")
	}
	ctx := context.Background()
	s := tinySuite(t)
	cfg := DefaultFitConfig()
	cfg.SamplesPerTask = 4
	base, recs, err := Fit(ctx, s, cfg, ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	brecs, data, err := BaseData(ctx, base, s, ExecutorRun, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != len(recs) || !slices.Equal(brecs, recs) {
		t.Fatalf("base data has %d examples, the fit %d", len(data), len(recs))
	}
	// Records that are not the model's: refused.
	edited := slices.Clone(recs)
	edited[3].Score += 0.1
	if _, err := BaseExamples(base, s, edited); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("base examples of edited records: %v", err)
	}

	// The run's executions: programs of the base data's tasks whose real
	// scores the base model gets wrong (its scores inverted), so a refit
	// must move towards them.
	var run []RunExample
	for i, r := range recs[:24] {
		task, err := s.Task(r.Task)
		if err != nil {
			t.Fatal(err)
		}
		run = append(run, RunExample{Group: fmt.Sprintf("%d/%s", i/8, r.Task), Card: task.Card.Vector(), Program: r.Program, Score: 1 - r.Score})
	}
	m1, err := Refit(base, data, run)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Refit(base, data, run)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := m1.Marshal()
	b2, _ := m2.Marshal()
	if !bytes.Equal(b1, b2) {
		t.Fatal("two refits of the same data differ")
	}
	sealed, _ := base.Marshal()
	base, _ = Load(sealed)
	if m1.Fit.Base != base.Checksum || m1.Fit.RunExamples != len(run) ||
		m1.Fit.Samples != len(data)+len(run) {
		t.Fatalf("refit %+v of base %.12s", m1.Fit, base.Checksum)
	}
	loaded, err := Load(b1)
	if err != nil || loaded.Fit.Base != base.Checksum || loaded.Checksum == base.Checksum {
		t.Fatalf("load refreshed artefact: %v", err)
	}
	// The refit is closer to the run's scores than the base.
	var before, after float64
	for _, r := range run {
		pb, _ := base.PredictText(r.Card, r.Program)
		pa, _ := m1.PredictText(r.Card, r.Program)
		before += (pb - r.Score) * (pb - r.Score)
		after += (pa - r.Score) * (pa - r.Score)
	}
	if !(after < before) {
		t.Errorf("squared error on the run's executions: %.4f before, %.4f after the refit", before, after)
	}
	// The order of the run's examples is part of the input, not noise: the
	// same set gives the same model only in the same order, so the caller
	// fixes it (step, group, sample).
	if _, err := Refit(m1, data, run); err == nil || !strings.Contains(err.Error(), "itself refreshed") {
		t.Errorf("refit of a refreshed model: %v", err)
	}
	if _, _, err := BaseData(ctx, m1, s, ExecutorRun, 2); err == nil {
		t.Error("base data of a refreshed model: no error")
	}
	bad := run[:1:1]
	bad[0].Program = "((("
	if _, err := Refit(base, data, bad); err == nil {
		t.Error("refit with a program that does not parse: no error")
	}
	other, err := suite.Generate(ctx, suite.Options{Seed: 6, Train: 3, HeldOut: 2, MinRows: 150, MaxRows: 200, MaxFeatures: 6, PanelSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := BaseData(ctx, base, other, ExecutorRun, 2); err == nil || !strings.Contains(err.Error(), "fitted on suite 5") {
		t.Errorf("base data on another suite: %v", err)
	}
}
