package executor

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"io"

	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
)

// Job is everything one evaluation needs. It is self-contained so that it can
// be run in a process or container that knows nothing about the suite.
type Job struct {
	TaskID  string
	Program string
	// Data holds the train split and the hidden test split with its labels.
	Data *tabular.Dataset
	// Leaderboard is the task's reference scores of its metric.
	Leaderboard []float64
	// Seed drives every random choice of the pipeline (subsampling, random
	// features, tree construction).
	Seed uint64
}

// Check reports whether the job is complete and its shapes agree.
func (j *Job) Check() error {
	d := j.Data
	if d == nil || d.XTrain == nil || d.XTest == nil {
		return fmt.Errorf("job %s: missing data", j.TaskID)
	}
	rTrain, cTrain := d.XTrain.Dims()
	rTest, cTest := d.XTest.Dims()
	switch {
	case cTrain != cTest:
		return fmt.Errorf("job %s: train has %d columns, test %d", j.TaskID, cTrain, cTest)
	case len(d.YTrain) != rTrain:
		return fmt.Errorf("job %s: %d train rows, %d train labels", j.TaskID, rTrain, len(d.YTrain))
	case len(d.YTest) != rTest:
		return fmt.Errorf("job %s: %d test rows, %d test labels", j.TaskID, rTest, len(d.YTest))
	case d.Kind != tabular.Regression && d.Kind != tabular.Classification:
		return fmt.Errorf("job %s: unknown kind %q", j.TaskID, d.Kind)
	case len(j.Leaderboard) == 0:
		return fmt.Errorf("job %s: empty leaderboard", j.TaskID)
	}
	return nil
}

// Encode serialises j with gob; the matrices travel in gonum's binary format,
// so a few thousand rows of 64 features cost a few megabytes.
func (j *Job) Encode() ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(j); err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.TaskID, err)
	}
	return buf.Bytes(), nil
}

// DecodeJob reads one job written by Encode and checks it.
func DecodeJob(r io.Reader) (*Job, error) {
	var j Job
	if err := gob.NewDecoder(r).Decode(&j); err != nil {
		return nil, fmt.Errorf("decode job: %w", err)
	}
	if err := j.Check(); err != nil {
		return nil, err
	}
	return &j, nil
}

// NewJob is the job of running program on task t with the given seed.
func NewJob(t *suite.Task, program string, seed uint64) *Job {
	return &Job{TaskID: t.ID, Program: program, Data: t.Data, Leaderboard: t.Leaderboard, Seed: seed}
}
