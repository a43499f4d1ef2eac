package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/diskspace"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/policy"
)

// Policy is the built-in autoregressive policy as a backend.Policy. Its
// checkpoints are files (policy.Save) named by Checkpoint.Location; the few
// most recently used are kept in memory. It is safe for concurrent use.
type Policy struct {
	Tasks *Tasks

	mu     sync.Mutex
	recent []cachedPolicy // most recently used last
}

var _ backend.Policy = (*Policy)(nil)

type cachedPolicy struct {
	path, hash string
	p          *policy.Policy
}

// keep is how many checkpoints Policy keeps in memory.
const keep = 4

// PolicyConfig is the built-in policy's configuration for a run's settings
// and a task feature length.
func PolicyConfig(s backend.PolicySettings, cardDim int) policy.Config {
	c := policy.DefaultConfig(policy.ProgramGrammar{}, cardDim)
	c.Hidden = s.Hidden
	c.LearningRate = s.LearningRate
	c.KLCoef = s.KLCoef
	return c
}

// Init writes checkpoint 0, sized to the suite's training tasks, to req.Dir.
func (p *Policy) Init(ctx context.Context, req backend.InitRequest) (backend.Checkpoint, error) {
	train, err := p.Tasks.Tasks(ctx, req.Suite, backend.Train)
	if err != nil {
		return backend.Checkpoint{}, err
	}
	if len(train) == 0 {
		return backend.Checkpoint{}, backend.Permanent(fmt.Errorf("suite %d has no training tasks", req.Suite))
	}
	pol, err := policy.Init(PolicyConfig(req.Settings, cardDim(req.Settings, len(train[0].Features))), policy.ProgramGrammar{}, req.Seed)
	if err != nil {
		return backend.Checkpoint{}, backend.Permanent(err)
	}
	return save(pol, req.Dir)
}

func save(pol *policy.Policy, dir string) (backend.Checkpoint, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return backend.Checkpoint{}, fmt.Errorf("create %s: %w", dir, diskspace.Annotate(err, dir))
	}
	path, err := pol.Save(dir)
	if err != nil {
		return backend.Checkpoint{}, err
	}
	return backend.Checkpoint{Version: int(pol.Step()), Hash: pol.Hash(), Location: path}, nil
}

// Sample draws one program per seed from the task's features.
func (p *Policy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	pol, err := p.load(req.Run, req.Checkpoint)
	if err != nil {
		return nil, err
	}
	multi := pol.Config().CardDim == len(req.Task.Features)+FeedbackDim()
	switch {
	case len(req.Previous) > 0 && !multi:
		return nil, backend.Permanent(fmt.Errorf("checkpoint %d is a single-shot policy: it takes no previous attempt", req.Checkpoint.Version))
	case len(req.Previous) > 0 && len(req.Previous) != len(req.Seeds):
		return nil, backend.Permanent(fmt.Errorf("%d previous attempts for %d seeds", len(req.Previous), len(req.Seeds)))
	}
	out := make([]backend.Completion, len(req.Seeds))
	for i, seed := range req.Seeds {
		card := req.Task.Features
		if multi {
			var prev *backend.Previous
			if len(req.Previous) > 0 {
				prev = &req.Previous[i]
			}
			if card, err = feedbackCard(req.Task.Features, prev); err != nil {
				return nil, backend.Permanent(fmt.Errorf("sample %d: %w", i, err))
			}
		}
		s, text, err := pol.SampleProgram(card, seed)
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		out[i] = backend.Completion{Text: text, Tokens: s.Tokens}
	}
	return out, nil
}

// Update applies one fused step to a copy of the base checkpoint
// (fusion.Examples re-encodes each program's text) and writes the result
// to req.Dir.
func (p *Policy) Update(ctx context.Context, req backend.UpdateRequest) (backend.Checkpoint, backend.UpdateStats, error) {
	base, err := p.load(req.Run, req.Base)
	if err != nil {
		return backend.Checkpoint{}, backend.UpdateStats{}, err
	}
	if int(base.Step()) != req.Base.Version {
		return backend.Checkpoint{}, backend.UpdateStats{}, backend.Permanent(
			fmt.Errorf("checkpoint %d holds a policy after %d updates", req.Base.Version, base.Step()))
	}
	batch := fusion.Batch{Run: req.Run, Step: req.Step, Items: make([]fusion.BatchItem, 0, len(req.Batch))}
	cards := map[string][]float64{}
	for _, d := range req.Batch {
		if len(d.Turns) == 0 {
			batch.Items = append(batch.Items, fusion.BatchItem{Group: d.Group, Sample: d.Sample, TaskID: d.Task.ID,
				Program: d.Text, Advantage: d.Advantage, Weight: d.Weight})
			cards[d.Task.ID] = d.Task.Features
			continue
		}
		// A multi-turn trajectory: each turn's action is an example of
		// the trajectory's advantage and weight, under the input it was
		// sampled from (the card and the previous attempt), keyed apart.
		for t, turn := range d.Turns {
			card, err := feedbackCard(d.Task.Features, turn.Previous)
			if err != nil {
				return backend.Checkpoint{}, backend.UpdateStats{}, backend.Permanent(
					fmt.Errorf("group %d sample %d turn %d: %w", d.Group, d.Sample, t+1, err))
			}
			id := fmt.Sprintf("%s#g%d/s%d/t%d", d.Task.ID, d.Group, d.Sample, t+1)
			cards[id] = card
			batch.Items = append(batch.Items, fusion.BatchItem{Group: d.Group, Sample: d.Sample, TaskID: id,
				Program: turn.Text, Advantage: d.Advantage, Weight: d.Weight})
		}
	}
	examples, err := fusion.Examples(batch, func(id string) ([]float64, error) { return cards[id], nil })
	if err != nil {
		return backend.Checkpoint{}, backend.UpdateStats{}, backend.Permanent(err)
	}
	next := base.Clone()
	var stats backend.UpdateStats
	if req.Sampler != nil {
		// Its errors say what they are: a sampler file that is missing
		// may appear (retried), a bad one cannot be repaired.
		if stats, err = p.updateOffPolicy(req, base, next, examples); err != nil {
			return backend.Checkpoint{}, backend.UpdateStats{}, err
		}
	} else if stats, err = next.Update(examples); err != nil {
		return backend.Checkpoint{}, backend.UpdateStats{}, backend.Permanent(fmt.Errorf("update step %d: %w", req.Step, err))
	}
	ck, err := save(next, req.Dir)
	if err != nil {
		return backend.Checkpoint{}, backend.UpdateStats{}, err
	}
	return ck, stats, nil
}

// updateOffPolicy applies to next the update of a batch sampled from
// req.Sampler, an older checkpoint than base: every example's sampling
// logprobs are its tokens' under the sampler, recomputed (the built-in
// policy is deterministic, so they are the ones Sample drew with), and the
// update weighs each token by its clipped importance ratio.
func (p *Policy) updateOffPolicy(req backend.UpdateRequest, base, next *policy.Policy, examples []policy.Example) (backend.UpdateStats, error) {
	s := *req.Sampler
	switch {
	case s.Version < 0 || s.Version >= req.Base.Version:
		return backend.UpdateStats{}, backend.Permanent(fmt.Errorf("update step %d: sampled from checkpoint %d: want an earlier "+
			"checkpoint than the base %d (the base itself is the sequential step, no sampler)", req.Step, s.Version, req.Base.Version))
	case !(req.RatioClip > 0 && req.RatioClip < 1):
		return backend.UpdateStats{}, backend.Permanent(fmt.Errorf("update step %d: ratio clip %v: want in (0, 1)", req.Step, req.RatioClip))
	}
	sampler, err := p.load(req.Run, s)
	if err != nil {
		return backend.UpdateStats{}, err
	}
	if int(sampler.Step()) != s.Version || sampler.Config() != base.Config() {
		return backend.UpdateStats{}, backend.Permanent(fmt.Errorf("update step %d: checkpoint %d (after %d updates) is not an "+
			"earlier checkpoint of the base's policy", req.Step, s.Version, sampler.Step()))
	}
	for i := range examples {
		lq, err := sampler.TokenLogProbs(examples[i].Card, examples[i].Tokens)
		if err != nil {
			return backend.UpdateStats{}, backend.Permanent(fmt.Errorf("update step %d: example %d under checkpoint %d: %w", req.Step, i, s.Version, err))
		}
		examples[i].SampleLogProbs = lq
	}
	stats, err := next.UpdateOffPolicy(examples, req.RatioClip)
	if err != nil {
		return backend.UpdateStats{}, backend.Permanent(fmt.Errorf("update step %d: %w", req.Step, err))
	}
	return stats, nil
}

// load returns the policy of a checkpoint, verified against its hash.
// Callers must not modify it (Update works on a Clone).
func (p *Policy) load(run string, c backend.Checkpoint) (*policy.Policy, error) {
	p.mu.Lock()
	for i, cp := range p.recent {
		if cp.path == c.Location && cp.hash == c.Hash {
			p.recent = append(append(p.recent[:i:i], p.recent[i+1:]...), cp)
			p.mu.Unlock()
			return cp.p, nil
		}
	}
	p.mu.Unlock()
	// A checkpoint file is written once, atomically (a synced temporary
	// file renamed into place), before its hash is recorded, and nothing
	// rewrites a recorded version: a reader sees the whole file or none of
	// it. A file that does not decode, or decodes to another hash, was
	// damaged or overwritten afterwards (by another deployment sharing the
	// data directory, say); retrying cannot repair it, so the step fails
	// instead of retrying for ever. A missing file stays retryable: a
	// shared volume may not be mounted yet.
	pol, err := policy.Load(c.Location, policy.ProgramGrammar{})
	if errors.Is(err, policy.ErrCorrupt) {
		return nil, backend.Permanent(fmt.Errorf("checkpoint %d of run %s is unusable (%w): the run cannot go on from it", c.Version, run, err))
	}
	if err != nil {
		return nil, err
	}
	if h := pol.Hash(); h != c.Hash {
		return nil, backend.Permanent(fmt.Errorf("checkpoint %d of run %s: file %s has hash %s, Postgres records %s: "+
			"the file was overwritten (by another run or deployment sharing the data directory?) and the run cannot go on from it",
			c.Version, run, c.Location, h, c.Hash))
	}
	p.mu.Lock()
	p.recent = append(p.recent, cachedPolicy{path: c.Location, hash: c.Hash, p: pol})
	if len(p.recent) > keep {
		p.recent = p.recent[1:]
	}
	p.mu.Unlock()
	return pol, nil
}
