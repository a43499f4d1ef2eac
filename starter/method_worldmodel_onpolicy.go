package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/grpoloop"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// policyTrajectory is one executed program of the reference loop.
type policyTrajectory struct {
	// SuiteSeed is the suite the task belongs to: task ids repeat across
	// suites, so --load checks it against --suite-seed.
	SuiteSeed uint64  `json:"suite_seed"`
	Step      int     `json:"step"`
	Group     int     `json:"group"`
	Sample    int     `json:"sample"`
	Task      string  `json:"task"`
	Program   string  `json:"program"`
	Score     float64 `json:"score"`
	Anchor    bool    `json:"anchor"`
}

// onPolicyVariant is one world model replayed over the trajectories.
type onPolicyVariant struct {
	Name     string                `json:"name"`
	Features worldmodel.FeatureSet `json:"features"`
	Every    int                   `json:"refresh_every,omitempty"`
	HalfLife float64               `json:"half_life,omitempty"`
	// Memory: scored with execution memory (--memory).
	Memory bool                   `json:"memory,omitempty"`
	Ranges []worldmodel.StepRange `json:"ranges"`
}

type onPolicyReport struct {
	SuiteSeed uint64            `json:"suite_seed"`
	Seed      uint64            `json:"seed"`
	Steps     int               `json:"steps"`
	Every     int               `json:"every"`
	Variants  []onPolicyVariant `json:"variants"`
}

func newWorldModelOnPolicyCmd(options suiteOptionsFunc) *cobra.Command {
	var (
		suiteSeed    uint64
		seed         uint64
		steps        int
		every        int
		refreshEvery int
		halfLife     float64
		save, load   string
		baseLog      string
		modelPaths   = map[worldmodel.FeatureSet]*string{worldmodel.FeaturesV1: new(string), worldmodel.FeaturesV2: new(string)}
		asJSON       bool
		memory       bool
	)
	cmd := &cobra.Command{
		Use:   "onpolicy [--suite-seed N] [--seed N] [--steps N] [--refresh-every E] [--half-life H] [--save F | --load F]",
		Short: "Compare the world models' ranking of a training policy's own programs, offline",
		Long: `onpolicy runs the in-process reference loop (grpoloop: plain GRPO with real
executions, the small benchmark preset's groups, samples, policy and budget;
the same checkpoints as a grpo run of that seed) for --steps steps, keeps
every executed program with its real score, and replays world models over
them. For every range of --every steps it prints the mean within-group
Spearman correlation of each world model's scores with the real ones on all
of the step's groups, as 'wmrl worldmodel anchors --executed' does:

  v1, v2           the stored models (default.json, default-v2.json; or
                   --model, --model-v2), frozen
  v1+r, v2+r       refreshed as world_model.refresh.every E would: after
                   step s with (s+1) % E == 0, refit on the frozen model's
                   training data plus the anchor groups' executions of steps
                   0..s (the anchor groups the small preset's wmrl run of
                   this seed would pick, 2 of 8), scoring steps s+1.. (so
                   always out of sample)
  v1+rH, v2+rH     the same with world_model.refresh.half_life H
  ...+m            with --memory, each of them with execution memory
                   (denoise.memory): a program an anchor group executed on
                   the same task at an earlier step scores its real score
                   (the run's update reads it in place of the calibrated
                   world-model score; here the others keep their raw one)

The frozen models' training data is regenerated (1536 executions) or read
from --base-log (the JSON lines of 'wmrl worldmodel fit --log'), and checked
to give both models back byte for byte: they must be fitted on the same
executions. --save writes the loop's
trajectories as JSON lines; --load reads them instead of running the loop.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := intIn("steps", steps, 1, 1000); err != nil {
				return err
			}
			if err := intIn("every", every, 1, maxStep); err != nil {
				return err
			}
			if err := intIn("refresh-every", refreshEvery, 1, maxStep); err != nil {
				return err
			}
			if err := floatIn("half-life", halfLife, 0, 1e6); err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg, err := runconfig.BenchPreset("small")
			if err != nil {
				return err
			}
			cfg.SuiteSeed, cfg.Seed, cfg.Steps = suiteSeed, seed, steps
			var trs []policyTrajectory
			if load != "" {
				if trs, err = readTrajectories(load); err != nil {
					return err
				}
				for _, t := range trs {
					if t.SuiteSeed != suiteSeed {
						return usagef("--load %s: trajectories of suite %d, but --suite-seed is %d", load, t.SuiteSeed, suiteSeed)
					}
				}
			} else {
				s, err := loadSuiteForCmd(cmd, options(suiteSeed))
				if err != nil {
					return err
				}
				if trs, err = referenceLoop(ctx, cmd.ErrOrStderr(), s, cfg); err != nil {
					return err
				}
				if save != "" {
					if err := writeTrajectories(save, trs); err != nil {
						return err
					}
				}
			}
			models := map[worldmodel.FeatureSet]*worldmodel.Model{}
			for _, fs := range worldmodel.FeatureSets() {
				flag := "--model"
				if fs != worldmodel.FeaturesV1 {
					flag += "-" + string(fs)
				}
				if path := *modelPaths[fs]; path != "" {
					if models[fs], err = loadModelFile(path); err != nil {
						return fmt.Errorf("%s: %w", flag, err)
					}
				} else if models[fs], err = worldmodel.DefaultFor(fs); err != nil {
					return err
				}
				if got := models[fs].FeatureSet(); got != fs {
					return usagef("%s: the artefact reads feature set %s, want %s", flag, got, fs)
				}
			}
			v1 := models[worldmodel.FeaturesV1]
			base, err := loadSuiteForCmd(cmd, options(v1.Fit.SuiteSeed))
			if err != nil {
				return err
			}
			var recs []worldmodel.Record
			if baseLog != "" {
				if recs, err = readRecords(baseLog); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "regenerating the stored models' training data (%d executions)...\n", v1.Fit.Samples)
				if recs, _, err = worldmodel.BaseData(ctx, v1, base, worldmodel.ExecutorRun, 0); err != nil {
					return err
				}
			}
			baseData := map[worldmodel.FeatureSet][]worldmodel.Example{}
			for fs, m := range models {
				if baseData[fs], err = worldmodel.BaseExamples(m, base, recs); err != nil {
					return fmt.Errorf("%s: %w", fs, err)
				}
			}
			s := base
			if suiteSeed != v1.Fit.SuiteSeed {
				if s, err = loadSuiteForCmd(cmd, options(suiteSeed)); err != nil {
					return err
				}
			}
			rep := onPolicyReport{SuiteSeed: suiteSeed, Seed: seed, Steps: steps, Every: every}
			type variant struct {
				name  string
				fs    worldmodel.FeatureSet
				every int
				hl    float64
			}
			var vs []variant
			for _, fs := range worldmodel.FeatureSets() {
				vs = append(vs, variant{string(fs), fs, 0, 0}, variant{string(fs) + "+r", fs, refreshEvery, 0})
				if halfLife > 0 {
					vs = append(vs, variant{string(fs) + "+r" + strconv.FormatFloat(halfLife, 'g', -1, 64), fs, refreshEvery, halfLife})
				}
			}
			for _, v := range vs {
				pairs, err := replayWorldModel(models[v.fs], baseData[v.fs], s, trs, v.every, v.hl)
				if err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
				r, err := worldmodel.OnPolicy(pairs, every)
				if err != nil {
					return err
				}
				rep.Variants = append(rep.Variants, onPolicyVariant{Name: v.name, Features: v.fs, Every: v.every, HalfLife: v.hl, Ranges: r})
				if memory {
					r, err := worldmodel.OnPolicy(rememberPairs(pairs, trs), every)
					if err != nil {
						return err
					}
					rep.Variants = append(rep.Variants, onPolicyVariant{Name: v.name + "+m", Features: v.fs, Every: v.every, HalfLife: v.hl,
						Memory: true, Ranges: r})
				}
			}
			if asJSON {
				return writeSuiteJSON(cmd.OutOrStdout(), rep)
			}
			return writeOnPolicy(cmd.OutOrStdout(), rep)
		},
	}
	addSuiteSeedFlag(cmd, &suiteSeed)
	f := cmd.Flags()
	f.Uint64Var(&seed, "seed", 1, "run seed of the reference loop")
	f.IntVar(&steps, "steps", 30, "steps of the reference loop")
	f.IntVar(&every, "every", 10, "steps per range")
	f.IntVar(&refreshEvery, "refresh-every", 5, "replayed world_model.refresh.every")
	f.Float64Var(&halfLife, "half-life", 0, "also replay world_model.refresh.half_life H (0: not)")
	f.StringVar(&save, "save", "", "write the loop's trajectories here (JSON lines)")
	f.StringVar(&load, "load", "", "read trajectories from here instead of running the loop")
	f.StringVar(&baseLog, "base-log", "", "the stored models' training executions (wmrl worldmodel fit --log)")
	f.StringVar(modelPaths[worldmodel.FeaturesV1], "model", "", "the v1 world model (default: the stored one)")
	f.StringVar(modelPaths[worldmodel.FeaturesV2], "model-v2", "", "the v2 world model (default: the stored one)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&memory, "memory", false, "also replay each world model with execution memory (denoise.memory): columns +m")
	return cmd
}

// referenceLoop runs cfg's grpo steps in process and returns every
// trajectory, marking the groups a wmrl run of cfg would anchor.
func referenceLoop(ctx context.Context, progress io.Writer, s *suite.Suite, cfg runconfig.Config) ([]policyTrajectory, error) {
	var train []string
	for _, t := range s.Split(suite.Train) {
		train = append(train, t.ID)
	}
	settings := backend.PolicySettings{LearningRate: cfg.Policy.LearningRate, KLCoef: cfg.Policy.KLCoef, Hidden: cfg.Policy.Hidden}
	p, err := grpoloop.InitPolicy(builtin.PolicyConfig(settings, suite.VectorLen), cfg.Seed)
	if err != nil {
		return nil, err
	}
	l, err := grpoloop.New(s, p, train, grpoloop.Config{Seed: cfg.Seed, Groups: cfg.Groups, Samples: cfg.Samples,
		Advantage: cfg.AdvantageConfig(),
		Exec:      grpoloop.ExecConfig{Budget: cfg.Sandbox.Budget, DeadlineSeconds: cfg.Sandbox.DeadlineSeconds}})
	if err != nil {
		return nil, err
	}
	var out []policyTrajectory
	for step := range cfg.Steps {
		r, err := l.Step(ctx)
		if err != nil {
			return nil, err
		}
		anc, err := anchors.Select(cfg.Seed, step, cfg.Groups, cfg.Anchors.Fraction, cfg.Anchors.Min, -1)
		if err != nil {
			return nil, err
		}
		isAnchor := map[int]bool{}
		for _, g := range anc {
			isAnchor[g] = true
		}
		for _, t := range r.Trajectories {
			out = append(out, policyTrajectory{SuiteSeed: cfg.SuiteSeed, Step: step, Group: t.Group, Sample: t.Sample, Task: t.TaskID, Program: t.Program,
				Score: t.Result.Score, Anchor: isAnchor[t.Group]})
		}
		fmt.Fprintf(progress, "step %d: mean reward %.4f\n", step, r.MeanScore)
	}
	return out, nil
}

// replayWorldModel scores every trajectory with frozen (every 0) or with
// the version a refresh every `every` steps (half-life hl) would have
// made from the anchor trajectories before it.
func replayWorldModel(frozen *worldmodel.Model, baseData []worldmodel.Example, s *suite.Suite, trs []policyTrajectory,
	every int, hl float64) ([]worldmodel.Pair, error) {
	cards := map[string][]float64{}
	cardOf := func(id string) ([]float64, error) {
		c, ok := cards[id]
		if !ok {
			t, err := s.Task(id)
			if err != nil {
				return nil, err
			}
			c = t.Card.Vector()
			cards[id] = c
		}
		return c, nil
	}
	current, madeAt := frozen, -1
	pairs := make([]worldmodel.Pair, 0, len(trs))
	for _, tr := range trs {
		// The version in force at tr.Step: the refresh after the last step
		// s < tr.Step with (s+1) % every == 0.
		if every > 0 {
			if s := (tr.Step/every)*every - 1; s >= 0 && s != madeAt {
				var run []worldmodel.RunExample
				for _, a := range trs {
					if !a.Anchor || a.Step > s {
						continue
					}
					c, err := cardOf(a.Task)
					if err != nil {
						return nil, err
					}
					run = append(run, worldmodel.RunExample{Group: fmt.Sprintf("%d/%d", a.Step, a.Group), Card: c, Program: a.Program,
						Score: a.Score, Weight: runconfig.Refresh{HalfLife: hl}.Weight(a.Step, s)})
				}
				m, err := worldmodel.Refit(frozen, baseData, run)
				if err != nil {
					return nil, err
				}
				current, madeAt = m, s
			}
		}
		c, err := cardOf(tr.Task)
		if err != nil {
			return nil, err
		}
		wm, err := current.PredictText(c, tr.Program)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, worldmodel.Pair{Group: fmt.Sprintf("%d/%d", tr.Step, tr.Group), Step: tr.Step, WM: wm, Env: tr.Score})
	}
	return pairs, nil
}

func writeOnPolicy(w io.Writer, rep onPolicyReport) error {
	fmt.Fprintf(w, "within-group Spearman on every group of a %d-step reference loop (suite %d, seed %d)\n", rep.Steps, rep.SuiteSeed, rep.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"steps", "groups", "ranked"}
	for _, v := range rep.Variants {
		head = append(head, v.Name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i, r := range rep.Variants[0].Ranges {
		row := []string{fmt.Sprintf("%d-%d", r.From, r.To), strconv.Itoa(r.Groups), strconv.Itoa(r.Ranked)}
		for _, v := range rep.Variants {
			row = append(row, fmt.Sprintf("%.3f", v.Ranges[i].Spearman))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

func writeTrajectories(path string, trs []policyTrajectory) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write trajectories: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, t := range trs {
		if err := enc.Encode(t); err != nil {
			f.Close()
			return fmt.Errorf("write trajectories: %w", err)
		}
	}
	return f.Close()
}

func readTrajectories(path string) ([]policyTrajectory, error) {
	var out []policyTrajectory
	err := readJSONLines(path, func(dec *json.Decoder) error {
		var t policyTrajectory
		if err := dec.Decode(&t); err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

func readRecords(path string) ([]worldmodel.Record, error) {
	var out []worldmodel.Record
	err := readJSONLines(path, func(dec *json.Decoder) error {
		var r worldmodel.Record
		if err := dec.Decode(&r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

func readJSONLines(path string, decode func(*json.Decoder) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	dec.DisallowUnknownFields()
	for dec.More() {
		if err := decode(dec); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// rememberPairs is pairs with execution memory (denoise.memory): a
// trajectory whose task and program an anchor group executed at an earlier
// step is scored by that real score (the mean of them), as fusion.Memory
// gives it to the update; the others keep the world model's. pairs[i] is
// trs[i]'s, and trs is in step order.
func rememberPairs(pairs []worldmodel.Pair, trs []policyTrajectory) []worldmodel.Pair {
	out := append([]worldmodel.Pair(nil), pairs...)
	var earlier []fusion.Execution
	lo := 0
	for lo < len(trs) {
		hi := lo
		for hi < len(trs) && trs[hi].Step == trs[lo].Step {
			hi++
		}
		mem := fusion.NewMemory(earlier)
		for i := lo; i < hi; i++ {
			if v, ok := mem.Score(trs[i].Task, trs[i].Program); ok {
				out[i].WM = v
			}
		}
		for _, t := range trs[lo:hi] {
			if t.Anchor {
				earlier = append(earlier, fusion.Execution{TaskID: t.Task, Program: t.Program, Score: t.Score})
			}
		}
		lo = hi
	}
	return out
}
