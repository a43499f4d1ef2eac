package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/reproduce"
)

// maxResultsBytes bounds a results.json read by wmrl bench frontier.
const maxResultsBytes = 64 << 20

// frontierOptions are the flags of wmrl bench frontier.
type frontierOptions struct {
	asJSON bool
	out    string
	grpo   string
	anchor []string
}

func newFrontierCmd() *cobra.Command {
	var o frontierOptions
	cmd := &cobra.Command{
		Use:   "frontier [--out DIR] [--grpo LABEL] [--anchor LABEL[,LABEL...]] LABEL=RESULTS[:MODE]...",
		Short: "Draw held-out score against training sandbox CPU from results of wmrl bench reproduce",
		Long: `frontier reads results of wmrl bench reproduce and draws one point per
argument: held-out score (mean ± standard error over seeds) against training
sandbox CPU-seconds (mean over seeds). Each argument is LABEL=RESULTS[:MODE]:
LABEL names the point; RESULTS is a results directory (its results.json is
read) or a results.json file under any name; MODE picks the runs of one mode
in it, and may be left out when the results hold one mode only. The part
after the last ':' is always read as a mode, so a path with ':' in it needs
its mode written out. A label given more than once is one point pooling the
runs of each argument (seeds 1-5 from one invocation and 6-8 from another):
they must share mode and configuration (their --config texts, each laid
over the preset, give the same run configuration: "suite_seed: 20260829"
pools with a run that left the default suite unnamed), and no seed may
appear twice. For example

  wmrl bench frontier --out /tmp/frontier grpo=base:grpo anchor=base:anchor \
    wmrl=base:wmrl 'sd 0=sim-0' 'sd 0.1=sim-0.1' 'sd 0.2=sim-0.2'

Points whose runs used the simulated world model (world_model.backend:
simulated in the results' --config) are joined by a line in the order of
their noise and annotated with it; grpo and anchor points have their own
glyphs. Every point is paired by seed with the grpo reference and with the
anchor reference: the only point of mode grpo (anchor), or the label given
by --grpo (--anchor). --anchor may name several labels, comma-separated:
the reference is then their per-seed mean over the seeds all of them ran,
for a control pooled with its null perturbations (the same control with the
learning rate 1% lower and higher, say), since one training run is one draw
of a chaotic process. Each point with a world model is marked for the
no-harm bar: its difference against the anchor reference at least minus
its standard error. All results must come from one suite (preset, suite
seed, steps). It writes to --out:

  frontier.png   the plot
  frontier.md    the sources and a table: label, seeds, held-out score per
                 seed, mean, standard error, CPU-seconds, executions, and
                 the paired differences (mean ± SE) versus the references
                 and the no-harm bar
  frontier.json  the same numbers

--json prints frontier.json to stdout instead of the table.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no point: give LABEL=RESULTS[:MODE] arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runFrontier(cmd, &o, args) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	f.StringVar(&o.out, "out", "frontier", "directory of frontier.png, frontier.md and frontier.json")
	f.StringVar(&o.grpo, "grpo", "", "label of the point the others are paired with as grpo (default: the only grpo point)")
	f.StringSliceVar(&o.anchor, "anchor", nil, "label of the point the others are paired with as anchor, or several labels whose per-seed mean is (default: the only anchor point)")
	return cmd
}

// frontierArg is one parsed LABEL=RESULTS[:MODE] argument.
type frontierArg struct {
	label, path string
	mode        mode.Mode // "" when not given
}

// parseFrontierArg reads LABEL=RESULTS[:MODE]; errors name the argument.
func parseFrontierArg(arg string) (frontierArg, error) {
	label, rest, ok := strings.Cut(arg, "=")
	label = strings.TrimSpace(label)
	switch {
	case !ok:
		return frontierArg{}, usagef("%q: want LABEL=RESULTS[:MODE]", arg)
	case label == "":
		return frontierArg{}, usagef("%q: empty label", arg)
	}
	a := frontierArg{label: label, path: rest}
	if i := strings.LastIndex(rest, ":"); i >= 0 {
		m, err := mode.Parse(rest[i+1:])
		if err != nil {
			return frontierArg{}, usagef("%q: mode after ':': %v", arg, err)
		}
		a.path, a.mode = rest[:i], m
	}
	if a.path == "" {
		return frontierArg{}, usagef("%q: empty results path", arg)
	}
	return a, nil
}

// loadFrontierSource reads the results an argument names and picks its
// mode's runs; errors name the argument.
func loadFrontierSource(arg string, a frontierArg) (reproduce.FrontierSource, error) {
	path := a.path
	st, err := os.Stat(path)
	if err != nil {
		return reproduce.FrontierSource{}, fmt.Errorf("%q: %w", arg, err)
	}
	if st.IsDir() {
		path = filepath.Join(path, reproduce.FileJSON)
	}
	data, err := readFileMax(path, maxResultsBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return reproduce.FrontierSource{}, fmt.Errorf("%q: %s has no %s", arg, a.path, reproduce.FileJSON)
	}
	if err != nil {
		return reproduce.FrontierSource{}, fmt.Errorf("%q: %w", arg, err)
	}
	res, err := reproduce.DecodeResults(bytes.NewReader(data))
	if err != nil {
		return reproduce.FrontierSource{}, fmt.Errorf("%q: %s: %w", arg, path, err)
	}
	var modes []string
	for _, r := range res.Runs {
		if !slices.Contains(modes, string(r.Mode)) {
			modes = append(modes, string(r.Mode))
		}
	}
	m := a.mode
	switch {
	case len(modes) == 0:
		return reproduce.FrontierSource{}, fmt.Errorf("%q: %s has no run", arg, path)
	case m == "" && len(modes) > 1:
		return reproduce.FrontierSource{}, &usageError{Err: fmt.Errorf("%q: %s holds modes %s: name one (LABEL=RESULTS:MODE)",
			arg, path, strings.Join(modes, ", "))}
	case m == "":
		m = mode.Mode(modes[0])
	case !slices.Contains(modes, string(m)):
		return reproduce.FrontierSource{}, fmt.Errorf("%q: %s has no run of mode %s (it holds %s)",
			arg, path, m, strings.Join(modes, ", "))
	}
	return reproduce.FrontierSource{Label: a.label, Path: path, Mode: m, Results: res}, nil
}

// frontierSources parses and loads every argument: syntax first (so a
// usage error is reported before any file is read), then the files.
func frontierSources(args []string) ([]reproduce.FrontierSource, error) {
	parsed := make([]frontierArg, len(args))
	seen := map[string]string{}
	for i, arg := range args {
		a, err := parseFrontierArg(arg)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[a.label+"\x00"+a.path]; dup {
			return nil, usagef("%q: label %q already reads %s (%q)", arg, a.label, a.path, prev)
		}
		seen[a.label+"\x00"+a.path] = arg
		parsed[i] = a
	}
	srcs := make([]reproduce.FrontierSource, len(args))
	for i, a := range parsed {
		s, err := loadFrontierSource(args[i], a)
		if err != nil {
			return nil, err
		}
		srcs[i] = s
	}
	return srcs, nil
}

func runFrontier(cmd *cobra.Command, o *frontierOptions, args []string) error {
	srcs, err := frontierSources(args)
	if err != nil {
		return err
	}
	fr, err := reproduce.BuildFrontier(srcs, o.grpo, o.anchor)
	var refErr *reproduce.ReferenceError
	if errors.As(err, &refErr) {
		return &usageError{Err: err}
	}
	if err != nil {
		return err
	}
	files, err := reproduce.WriteFrontier(o.out, fr)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if o.asJSON {
		return writeJSON(w, fr)
	}
	if err := reproduce.FrontierTable(w, fr); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s to %s\n", strings.Join(files, ", "), o.out)
	return nil
}
