package reproduce

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/wmrl/wmrl/internal/mode"
)

// StepRecord is one completed training step of a run.
type StepRecord struct {
	Step int `json:"step"`
	// Groups and AnchorGroups count the step's groups and its anchor groups.
	Groups       int `json:"groups"`
	AnchorGroups int `json:"anchor_groups"`
	// Executions counts the step's training trajectories graded by real
	// execution (of a multi-turn step, its executed turns: K per real
	// trajectory); CPUSeconds and WallSeconds are their sandbox cost.
	Executions  int     `json:"executions"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	// WMCalls counts the trajectories the world model scored (of a
	// multi-turn step, its calls over all turns).
	WMCalls int `json:"wm_calls"`
	// Rho is the step's anchor weight; BiasBefore and BiasAfter the mean
	// bias (r_wm − r_env) of the calibration window before and after the
	// map (0 in modes that do not debias).
	Rho        float64 `json:"rho"`
	BiasBefore float64 `json:"bias_before"`
	BiasAfter  float64 `json:"bias_after"`
	// HeldOut is the held-out score (avg@n, real execution) of the policy
	// after this step, when it was evaluated; EvalExecutions and
	// EvalCPUSeconds are that evaluation's cost, apart from training.
	HeldOut        *float64 `json:"heldout_score,omitempty"`
	EvalExecutions int      `json:"eval_executions"`
	EvalCPUSeconds float64  `json:"eval_cpu_seconds"`
}

// Record is one benchmark run: a mode and a seed, its completed steps in
// order, and its wall-clock time from start to end.
type Record struct {
	Mode        mode.Mode    `json:"mode"`
	Seed        uint64       `json:"seed"`
	RunID       string       `json:"run_id"`
	Steps       []StepRecord `json:"steps"`
	WallSeconds float64      `json:"wall_seconds"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	Cores       int    `json:"cores"`
	MemoryBytes uint64 `json:"memory_bytes"`
	GoVersion   string `json:"go_version"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
}

// Header says how the results were made: the exact command, the date
// (RFC 3339) and the machine.
type Header struct {
	Command string  `json:"command"`
	Date    string  `json:"date"`
	Machine Machine `json:"machine"`
	// Config is the YAML laid over the preset for every run (--config),
	// empty when the preset ran unchanged.
	Config string `json:"config,omitempty"`
	// Defaults is the version of the presets' defaults the runs had
	// (runconfig.Defaults); 0 (omitted) in results made before version 1,
	// whose denoiser defaulted to the fused estimator without memory.
	Defaults int `json:"defaults,omitempty"`
}

// Input is everything a report is made from.
type Input struct {
	Header    Header
	Preset    string
	SuiteSeed uint64
	Steps     int
	Records   []Record
	// Notes are printed in results.md (runs left out, how they failed).
	Notes []string
}

// Run is one (mode, seed) object of results.json.
type Run struct {
	Mode mode.Mode `json:"mode"`
	Seed uint64    `json:"seed"`
	// HeldOutScore is the final policy's held-out score (avg@n, real
	// execution).
	HeldOutScore float64 `json:"heldout_score"`
	// Executions, SandboxCPUSeconds and SandboxWallSeconds count the
	// training executions only.
	Executions         int     `json:"executions"`
	SandboxCPUSeconds  float64 `json:"sandbox_cpu_seconds"`
	SandboxWallSeconds float64 `json:"sandbox_wall_seconds"`
	// EvalExecutions and EvalCPUSeconds count the held-out evaluations.
	EvalExecutions int     `json:"eval_executions"`
	EvalCPUSeconds float64 `json:"eval_cpu_seconds"`
	WMCalls        int     `json:"wm_calls"`
	WallSeconds    float64 `json:"wall_seconds"`
	FinalRho       float64 `json:"final_rho"`
	// BiasRemoved is |bias before| − |bias after| of the last step's
	// calibration (0 in modes that do not debias).
	BiasRemoved float64 `json:"bias_removed"`
	// AnchorFraction is the realised fraction of anchor groups.
	AnchorFraction float64 `json:"anchor_fraction"`
}

// Results is results.json.
type Results struct {
	Header    Header `json:"header"`
	Preset    string `json:"preset"`
	SuiteSeed uint64 `json:"suite_seed"`
	Steps     int    `json:"steps"`
	Runs      []Run  `json:"runs"`
}

// Totals sums a record's steps into its results.json object. A record
// without a held-out evaluation is an error.
func Totals(r Record) (Run, error) {
	out := Run{Mode: r.Mode, Seed: r.Seed, WallSeconds: r.WallSeconds}
	if len(r.Steps) == 0 {
		return out, fmt.Errorf("run %s (%s seed %d): no completed step", r.RunID, r.Mode, r.Seed)
	}
	heldOut := false
	groups, anchorGroups := 0, 0
	for i, s := range r.Steps {
		if i > 0 && s.Step <= r.Steps[i-1].Step {
			return out, fmt.Errorf("run %s: step %d after step %d", r.RunID, s.Step, r.Steps[i-1].Step)
		}
		out.Executions += s.Executions
		out.SandboxCPUSeconds += s.CPUSeconds
		out.SandboxWallSeconds += s.WallSeconds
		out.EvalExecutions += s.EvalExecutions
		out.EvalCPUSeconds += s.EvalCPUSeconds
		out.WMCalls += s.WMCalls
		groups += s.Groups
		anchorGroups += s.AnchorGroups
		if s.HeldOut != nil {
			out.HeldOutScore, heldOut = *s.HeldOut, true
		}
	}
	if !heldOut {
		return out, fmt.Errorf("run %s (%s seed %d): no held-out evaluation", r.RunID, r.Mode, r.Seed)
	}
	last := r.Steps[len(r.Steps)-1]
	out.FinalRho = last.Rho
	if r.Mode.Pieces().Debias {
		out.BiasRemoved = math.Abs(last.BiasBefore) - math.Abs(last.BiasAfter)
	}
	if groups > 0 {
		out.AnchorFraction = float64(anchorGroups) / float64(groups)
	}
	return out, nil
}

// Build makes results.json's content: one Run per record, ordered by mode
// (mode.All's order) then seed. Modes must be valid and (mode, seed)
// unique.
func Build(in Input) (Results, error) {
	res := Results{Header: in.Header, Preset: in.Preset, SuiteSeed: in.SuiteSeed, Steps: in.Steps, Runs: []Run{}}
	type key struct {
		m    mode.Mode
		seed uint64
	}
	seen := map[key]bool{}
	var errs []error
	for _, r := range sortedRecords(in.Records) {
		if err := r.Mode.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", r.RunID, err))
			continue
		}
		k := key{r.Mode, r.Seed}
		if seen[k] {
			errs = append(errs, fmt.Errorf("mode %s seed %d: two records", r.Mode, r.Seed))
			continue
		}
		seen[k] = true
		run, err := Totals(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Runs = append(res.Runs, run)
	}
	if err := errors.Join(errs...); err != nil {
		return Results{}, err
	}
	return res, nil
}

// modeRank is a mode's position in mode.All (len(All) for an unknown one).
func modeRank(m mode.Mode) int {
	all := mode.All()
	for i, x := range all {
		if x == m {
			return i
		}
	}
	return len(all)
}

// sortedRecords returns the records ordered by mode then seed.
func sortedRecords(rs []Record) []Record {
	out := append([]Record(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := modeRank(out[i].Mode), modeRank(out[j].Mode)
		if ri != rj {
			return ri < rj
		}
		return out[i].Seed < out[j].Seed
	})
	return out
}
