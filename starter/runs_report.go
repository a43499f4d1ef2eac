package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/runreport"
	"github.com/wmrl/wmrl/internal/store"
)

// maxReportMaps bounds --maps: the maps share one plot.
const maxReportMaps = 8

func newReportCmd(cf *connFlags) *cobra.Command {
	var (
		out    string
		maps   int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "report RUN [--out FILE] [--maps N] [--json]",
		Short: "Write a run's curves and calibration maps as one self-contained HTML page",
		Long: `report reads a run from Postgres and writes one HTML page (default RUN.html;
--out - writes it to stdout) that needs no other file: the run's summary, its
curves by step drawn as wmrl bench reproduce draws its plots (training reward,
held-out score, rho, the calibration window's mean bias before and after the
map, training executions and their sandbox CPU seconds), the isotonic maps of
the debiaser at --maps steps spread over the run (the steps whose map is not
the identity, the first and last included), and a table of every step's
numbers. The plots are inline SVG.

A run in progress is reported as far as it got: its completed steps. The same
rows always give the same page. --json prints what the page shows (the run, its
completed steps, the maps drawn) as one object instead of writing the page.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := intIn("maps", maps, 0, maxReportMaps); err != nil {
				return err
			}
			if out == "" {
				return usagef("--out: must not be empty (- for stdout)")
			}
			id := args[0]
			ctx := cmd.Context()
			st, err := cf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := findRun(ctx, st, id); err != nil {
				return err
			}
			d, err := runreport.Collect(ctx, st, id, maps)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			var page bytes.Buffer
			if err := runreport.Write(&page, d); err != nil {
				return err
			}
			if out == "-" {
				_, err := page.WriteTo(cmd.OutOrStdout())
				return err
			}
			path := out
			if !cmd.Flags().Changed("out") {
				path = id + ".html"
			}
			if err := writeFileAtomic(path, page.Bytes()); err != nil {
				return fmt.Errorf("report %s: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: run %s (%s, %s), %d of %d steps completed, %d calibration maps, %d bytes\n",
				path, id, d.Run.Mode, d.Run.State, len(d.Steps), d.Run.Steps, len(d.Maps), page.Len())
			if d.Turns != nil {
				fmt.Fprintln(cmd.OutOrStdout(), turnsLine(*d.Turns))
			}
			return nil
		},
	}
	uses(cmd, groupPostgres)
	cmd.Flags().StringVar(&out, "out", "RUN.html", "file to write (- for stdout)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report's data as one JSON object instead of writing the page")
	cmd.Flags().IntVar(&maps, "maps", runreport.DefaultMaps, fmt.Sprintf("calibration maps to draw (0..%d)", maxReportMaps))
	return cmd
}

// writeFileAtomic writes b to path through a temporary file in the same
// directory renamed into place, so that path is never left half written.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// turnsLine is a multi-turn run's turns on one line: the mean reward by
// turn index and the share of trajectories that improved after their
// first turn, for each source, and the turns that executed nothing
// (request_info and malformed turns), when there are any.
func turnsLine(t runreport.Turns) string {
	var order []store.Source
	rewards := map[store.Source][]string{}
	for _, x := range t.ByIndex {
		if _, ok := rewards[x.Source]; !ok {
			order = append(order, x.Source)
		}
		r := "-"
		if x.Rewarded > 0 {
			r = fmt.Sprintf("%.3f", x.MeanReward)
		}
		rewards[x.Source] = append(rewards[x.Source], r)
	}
	parts := make([]string, 0, len(order))
	for _, src := range order {
		parts = append(parts, fmt.Sprintf("%s %s", src, strings.Join(rewards[src], ", ")))
	}
	line := fmt.Sprintf("turns: %d per trajectory; mean reward by turn: %s", t.K, strings.Join(parts, "; "))
	var imp []string
	for _, x := range t.Improved {
		imp = append(imp, fmt.Sprintf("%s %d of %d (%.0f%%)", x.Source, x.Improved, x.Compared, 100*runreport.Share(x)))
	}
	if len(imp) > 0 {
		line += "; improved after turn 1: " + strings.Join(imp, ", ")
	}
	unexecuted := 0
	for _, x := range t.ByIndex {
		unexecuted += x.Unexecuted
	}
	if unexecuted > 0 {
		line += fmt.Sprintf("; %d turns executed nothing (request_info, malformed)", unexecuted)
	}
	return line
}
