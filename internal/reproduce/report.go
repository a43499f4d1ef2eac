package reproduce

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wmrl/wmrl/internal/mode"
)

// Report files written by WriteAll.
const (
	FileJSON     = "results.json"
	FileMarkdown = "results.md"
)

// WriteJSON writes results.json's content, indented.
func WriteJSON(w io.Writer, res Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	return nil
}

// DecodeResults reads results.json strictly: an unknown field or trailing
// data is an error.
func DecodeResults(r io.Reader) (Results, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var res Results
	if err := dec.Decode(&res); err != nil {
		return Results{}, fmt.Errorf("decode results: %w", err)
	}
	if dec.More() {
		return Results{}, fmt.Errorf("decode results: trailing data")
	}
	return res, nil
}

func pm(s Stat, prec int) string {
	return fmt.Sprintf("%.*f ± %.*f", prec, s.Mean, prec, s.SD)
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// Table writes the paper-shaped table: mode, execution cost, held-out
// score and cost reduction versus grpo.
func Table(w io.Writer, s Summary) error {
	var b strings.Builder
	b.WriteString("| mode | sandbox CPU-seconds | executions | held-out score (avg@n) | cost reduction vs grpo |\n")
	b.WriteString("|---|---:|---:|---:|---:|\n")
	for _, m := range s.Modes {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s |\n", m.Mode, pm(m.CPUSeconds, 1), m.Executions.Mean,
			pm(m.HeldOut, 4), FormatReduction(m.CostReduction))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// Markdown writes results.md: the header, the main table, the ablation
// table, the other measured quantities, the goal checks, the notes and the
// plots.
func Markdown(w io.Writer, res Results, s Summary, notes, plots []string) error {
	var b bytes.Buffer
	h := res.Header
	fmt.Fprintf(&b, "# wmrl bench reproduce: %s preset\n\n", res.Preset)
	fmt.Fprintf(&b, "- command: `%s`\n", h.Command)
	fmt.Fprintf(&b, "- date: %s\n", h.Date)
	mc := h.Machine
	fmt.Fprintf(&b, "- machine: %d cores, %s memory, %s %s/%s\n", mc.Cores, gib(mc.MemoryBytes), mc.GoVersion, mc.OS, mc.Arch)
	fmt.Fprintf(&b, "- preset %s, suite seed %d, %d steps per run, %d runs\n", res.Preset, res.SuiteSeed, res.Steps, len(res.Runs))
	if h.Config != "" {
		fmt.Fprintf(&b, "- configuration laid over the preset for every run:\n\n```yaml\n%s\n```\n", strings.TrimRight(h.Config, "\n"))
	}
	b.WriteString("\n")
	b.WriteString("Means ± sample standard deviations over seeds. Sandbox CPU-seconds and executions count the\n")
	b.WriteString("training executions only; the held-out evaluation (real execution in every mode) is counted\n")
	b.WriteString("apart below. Cost reduction is grpo's mean sandbox CPU-seconds over the mode's.\n\n")
	b.WriteString("## Execution cost and held-out score\n\n")
	if err := Table(&b, s); err != nil {
		return err
	}

	if len(s.Pairs) > 0 {
		b.WriteString("\n## Paired by seed\n\n")
		b.WriteString("Held-out score of the first mode minus the second's, per seed, then the mean of the\n")
		b.WriteString("differences ± its standard error (sd of the differences / √n).\n\n")
		b.WriteString("| difference | mean ± SE | seeds |\n|---|---:|---:|\n")
		for _, d := range s.Pairs {
			fmt.Fprintf(&b, "| %s − %s | %+.4f ± %.4f | %d |\n", d.A, d.B, d.Mean, d.SE, d.N)
		}
	}

	b.WriteString("\n## Ablation\n\n")
	b.WriteString("| mode | debias | denoise | held-out score | vs mix |\n|---|---|---|---:|---:|\n")
	mix, hasMix := s.Mode(mode.Mix)
	for _, m := range []mode.Mode{mode.Mix, mode.Debias, mode.Denoise, mode.WMRL} {
		ms, ok := s.Mode(m)
		if !ok {
			continue
		}
		delta := "n/a"
		if hasMix {
			delta = fmt.Sprintf("%+.4f", ms.HeldOut.Mean-mix.HeldOut.Mean)
		}
		pc := m.Pieces()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", m, yesNo(pc.Debias), yesNo(pc.Denoise), pm(ms.HeldOut, 4), delta)
	}

	b.WriteString("\n## Other measurements\n\n")
	b.WriteString("| mode | seeds | sandbox wall-seconds | eval executions | eval CPU-seconds | WM calls | run wall-seconds | final ρ | bias removed | anchor fraction |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range s.Modes {
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %s | %.0f | %s | %s | %s | %.3f |\n", m.Mode, len(m.Seeds),
			pm(m.WallSeconds, 1), m.EvalExecutions.Mean, pm(m.EvalCPUSeconds, 1), m.WMCalls.Mean, pm(m.RunWall, 0),
			pm(m.FinalRho, 3), pm(m.BiasRemoved, 4), m.AnchorFraction.Mean)
	}

	b.WriteString("\n## Goals\n\n")
	for _, g := range s.Goals {
		fmt.Fprintf(&b, "- **%s**: %s (%s)\n", g.Status, g.Name, g.Detail)
	}
	if len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(p, filepath.Ext(p)), p)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteAll builds the results from in and writes results.json, results.md
// and the plots to dir (created if needed). It returns the results, their
// summary and the names of the files written.
func WriteAll(dir string, in Input) (Results, Summary, []string, error) {
	res, err := Build(in)
	if err != nil {
		return Results{}, Summary{}, nil, err
	}
	s := Summarise(res)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, s, nil, fmt.Errorf("results dir: %w", err)
	}
	plots, err := WritePlots(dir, in.Records)
	if err != nil {
		return res, s, nil, err
	}
	var js, md bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		return res, s, nil, err
	}
	if err := Markdown(&md, res, s, in.Notes, plots); err != nil {
		return res, s, nil, err
	}
	files := []struct {
		name string
		data []byte
	}{{FileJSON, js.Bytes()}, {FileMarkdown, md.Bytes()}}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return res, s, nil, fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return res, s, append([]string{FileJSON, FileMarkdown}, plots...), nil
}
