package workflows

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
)

// The audit in the Temporal Web UI (workflow change changeUISummaries):
// every activity the workflows schedule carries a one-line summary
// (ActivityOptions.Summary, LocalActivityOptions.Summary), each step child
// workflow a static summary and details, and the step and run workflows
// keep their current details (workflow.SetCurrentDetails: the step's
// result line, the run's progress). The text is built only from what the
// workflow already holds (its input, the results recorded in its
// history), so replay builds the same text. A summary is user metadata of
// a command: it adds no command and replay does not compare it.

// maxSummary bounds a summary's bytes, well under the server's limit on
// user metadata summaries (limit.userMetadataSummarySize, 400 bytes by
// default), which would fail the workflow task.
const maxSummary = 200

// clip shortens s to maxSummary bytes on a rune boundary, marking the cut.
func clip(s string) string {
	if len(s) <= maxSummary {
		return s
	}
	cut := maxSummary - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// summarized returns ctx whose activity options carry summary; ctx itself
// when on is false (histories recorded before changeUISummaries).
func summarized(ctx workflow.Context, on bool, format string, args ...any) workflow.Context {
	if !on {
		return ctx
	}
	o := workflow.GetActivityOptions(ctx)
	o.Summary = clip(fmt.Sprintf(format, args...))
	return workflow.WithActivityOptions(ctx, o)
}

// summarizedLocal is summarized for local activity options.
func summarizedLocal(ctx workflow.Context, on bool, format string, args ...any) workflow.Context {
	if !on {
		return ctx
	}
	o := workflow.GetLocalActivityOptions(ctx)
	o.Summary = clip(fmt.Sprintf(format, args...))
	return workflow.WithLocalActivityOptions(ctx, o)
}

// uiSummaries asks for changeUISummaries: true in workflows started with it.
func uiSummaries(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changeUISummaries, workflow.DefaultVersion, 1) >= 1
}

// stepSummary is a step child workflow's static summary: "step 7 wmrl".
func stepSummary(in StepInput) string {
	return clip(fmt.Sprintf("step %d %s", in.Step, in.Config.Mode))
}

// stepDetails is a step child workflow's static details (Markdown): what
// the step starts from.
func stepDetails(in StepInput) string {
	wm := "frozen"
	if v := in.WorldModel; v != nil {
		wm = fmt.Sprintf("refreshed after step %d (%s)", v.Step, short(v.Hash))
	}
	return fmt.Sprintf("run **%s**, mode %s, step %d of %d  \n"+
		"checkpoint %d (%s), %d groups × %d samples, anchor fraction %.3g  \n"+
		"world model %s",
		in.RunID, in.Config.Mode, in.Step, in.Config.Steps,
		in.Checkpoint.Version, short(in.Checkpoint.Hash), in.Config.Groups, in.Config.Samples, in.AnchorFraction, wm) +
		pipelineDetails(in)
}

// pipelineDetails adds a pipelined step's sampling checkpoint to its
// details; nothing for a sequential step.
func pipelineDetails(in StepInput) string {
	sp := in.Sampler
	if sp == nil {
		return ""
	}
	s := fmt.Sprintf("  \nsamples from checkpoint %d (%s), pipeline.max_off_policy %d", sp.Version, short(sp.Hash),
		in.Config.Pipeline.OffPolicy())
	if in.AwaitPrevious {
		s += "; checkpoint and denoiser state from step " + fmt.Sprint(in.Step-1) + " when it is done"
	}
	return s
}

// short is a hash's first 12 characters.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// stepLine is a finished step's result in one line: ρ, the calibration
// window's bias before and after the map (modes that calibrate), the
// executed trajectories (and turns that executed nothing) and the mean
// training reward.
func stepLine(step int, res StepResult) string {
	m := res.Metrics
	s := fmt.Sprintf("step %d: ρ %.3f", step, res.Rho)
	if m.Gate != nil {
		s += ", " + m.Gate.String()
	}
	if m.Scoring != nil {
		s += ", " + m.Scoring.String()
	}
	if m.Remembered > 0 {
		s += fmt.Sprintf(", %d remembered", m.Remembered)
	}
	if res.Calibration != nil {
		s += fmt.Sprintf(", bias %+.4f → %+.4f (%d pairs)", m.BiasBefore, m.BiasAfter, m.CalibrationPairs)
	}
	s += fmt.Sprintf(", %d executed", m.Executed)
	if m.Ungraded > 0 {
		s += fmt.Sprintf(" (%d ungraded)", m.Ungraded)
	}
	if m.Unexecuted > 0 {
		s += fmt.Sprintf(", %d turns unexecuted", m.Unexecuted)
	}
	if m.ImportanceRatioMean != 0 {
		s += fmt.Sprintf(", ratio %.3f (max %.3f)", m.ImportanceRatioMean, m.ImportanceRatioMax)
	}
	return s + fmt.Sprintf(", mean reward %.4f, checkpoint %d", m.MeanReward, res.Checkpoint.Version)
}

// runDetails is the run's current details (Markdown): where it is, its
// last step's line and its latest held-out score.
func runDetails(runID string, steps int, st *RunState, state string) string {
	lines := []string{fmt.Sprintf("run **%s**: %s, %d of %d steps done, checkpoint %d (%s)",
		runID, state, st.Step, steps, st.Checkpoint.Version, short(st.Checkpoint.Hash))}
	if l := st.Last; l != nil {
		m := l.Metrics
		line := fmt.Sprintf("last step %d: ρ %.3f, %d executed, mean reward %.4f", l.Step, m.Rho, m.Executed, m.MeanReward)
		if m.CalibrationPairs > 0 {
			line += fmt.Sprintf(", bias %+.4f → %+.4f", m.BiasBefore, m.BiasAfter)
		}
		lines = append(lines, line)
	}
	if h := st.HeldOut; h != nil {
		lines = append(lines, fmt.Sprintf("held-out %.4f at checkpoint %d (%d tasks, %d samples)",
			h.Score, h.Version, h.Tasks, h.Samples))
	}
	if v := st.WorldModel; v != nil {
		lines = append(lines, fmt.Sprintf("world model refreshed after step %d (%s)", v.Step, short(v.Hash)))
	}
	// Two trailing spaces: a Markdown line break.
	return strings.Join(lines, "  \n")
}

// taskOf is the task of group g's generation, "" when unknown.
func taskOf(gen []activities.GenerateResponse, g int) string {
	if g < 0 || g >= len(gen) {
		return ""
	}
	return gen[g].TaskID
}
