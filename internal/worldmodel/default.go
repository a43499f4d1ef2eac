package worldmodel

import (
	"context"
	_ "embed"
	"fmt"
	"os"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/suite"
)

// defaultArtefact is the stored world model, rebuilt by
//
//	wmrl worldmodel fit --out internal/worldmodel/default.json
//
// (suite seed suite.DefaultSeed, DefaultSamplesPerTask samples per training
// task, seed DefaultFitSeed). It is read only through Default.
//
//go:embed default.json
var defaultArtefact []byte

// defaultV2Artefact is the stored world model on FeaturesV2, rebuilt by
//
//	wmrl worldmodel fit --features v2 --out internal/worldmodel/default-v2.json
//
// (the same executions as default.json: the same suite, samples and seed).
// It is read only through DefaultFor.
//
//go:embed default-v2.json
var defaultV2Artefact []byte

// Default loads the stored world model (checked like any artefact).
func Default() (*Model, error) { return Load(defaultArtefact) }

// DefaultFor loads the stored world model of a feature set: default.json
// for FeaturesV1, default-v2.json for FeaturesV2.
func DefaultFor(fs FeatureSet) (*Model, error) {
	switch fs {
	case FeaturesV1:
		return Default()
	case FeaturesV2:
		return Load(defaultV2Artefact)
	}
	return nil, fmt.Errorf("stored world model: unknown feature set %q", fs)
}

// LoadFile loads an artefact from a file (see Load); "" means the stored
// model (Default).
func LoadFile(path string) (*Model, error) {
	if path == "" {
		return Default()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read world model: %w", err)
	}
	m, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// DefaultArtefact returns a copy of the stored artefact's bytes.
func DefaultArtefact() []byte { return append([]byte(nil), defaultArtefact...) }

// ExecutorRun is the RunFunc of offline logging: the task's job is run
// in-process by executor.Run (no sandbox), and the result's ladder score
// returned. Errors are executor errors (a malformed job), not solution
// failures.
func ExecutorRun(ctx context.Context, t *suite.Task, prog string, seed uint64) (float64, error) {
	res, err := executor.Run(ctx, &executor.Job{
		TaskID:      t.ID,
		Program:     prog,
		Data:        t.Data,
		Leaderboard: t.Leaderboard,
		Seed:        seed,
	})
	if err != nil {
		return 0, err
	}
	return res.Score, nil
}

var _ RunFunc = ExecutorRun
