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

// Default loads the stored world model (checked like any artefact).
func Default() (*Model, error) { return Load(defaultArtefact) }

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
