package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/tasks"
)

// tasksFlags are the flags of every tasks subcommand.
type tasksFlags struct {
	dataDir string
	asJSON  bool
}

func (f *tasksFlags) add(cmd *cobra.Command, jsonHelp string) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", deployenv.Read().DataDir,
		"data directory; the imported tasks are in its tasks/ ($"+deployenv.EnvDataDir+")")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, jsonHelp)
}

func (f *tasksFlags) store() (tasks.Store, error) {
	if f.dataDir == "" {
		return tasks.Store{}, usagef("--data-dir: must not be empty")
	}
	return tasks.Store{Dir: tasks.StoreDir(f.dataDir)}, nil
}

// task returns imported task id (a malformed id is a usage error).
func (f *tasksFlags) task(id string) (*tasks.Task, error) {
	if err := tasks.CheckID(id); err != nil {
		return nil, usagef("ID: %v", err)
	}
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	return s.Get(id)
}

func newTasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Import, list and show real research tasks (data, metric, leaderboard)",
		Long: `A real task is a directory in the spirit of MLE-bench: task.yaml (id, title,
kind, metric, direction, time and memory limits, columns, labels, source),
description.md, public/ (train.csv, test.csv, sample_submission.csv: what a
solution sees), private/answers.csv (what only the grader sees) and
leaderboard.csv (the reference panel's scores, best first).
deploy/pytasks.sh prepare OUT writes such tasks from the datasets Debian's
scikit-learn and statsmodels packages ship.

Imported tasks are kept in the data directory's tasks/, each under the
SHA-256 of its files, so that what a run trained on can be read again.`,
	}
	cmd.AddCommand(newTasksImportCmd(), newTasksPanelCmd(), newTasksListCmd(), newTasksShowCmd(), newTasksGradeCmd())
	return cmd
}

// tasksImportEntry is one element of wmrl tasks import --json.
type tasksImportEntry struct {
	ID       string `json:"id"`
	Hash     string `json:"hash"`
	From     string `json:"from"`
	Status   string `json:"status"` // imported, unchanged or replaced
	Previous string `json:"previous,omitempty"`
}

func newTasksImportCmd() *cobra.Command {
	var (
		f       tasksFlags
		replace bool
	)
	cmd := &cobra.Command{
		Use:   "import DIR... [--replace] [--json]",
		Short: "Check task directories and add them to the task store",
		Long: `import checks each task directory and copies it into the store. A
malformed task is refused, naming each problem's file, field and line, and
then no task is imported. Importing the same files again changes nothing;
other files under an id already imported are refused unless --replace (the
old files stay in the store, under their hash).

--json prints a list of {id, hash, from, status, previous}; status is
imported, unchanged or replaced.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.store()
			if err != nil {
				return err
			}
			// Check every task before importing any.
			ids := map[string]string{}
			for _, dir := range args {
				t, err := tasks.Load(dir)
				if err != nil {
					return err
				}
				if prev, dup := ids[t.Spec.ID]; dup {
					return fmt.Errorf("%s and %s are both task %s", prev, dir, t.Spec.ID)
				}
				ids[t.Spec.ID] = dir
			}
			var report []tasksImportEntry
			for _, dir := range args {
				imp, err := s.Import(dir, replace)
				if err != nil {
					return err
				}
				e := tasksImportEntry{ID: imp.Task.Spec.ID, Hash: imp.Task.Hash, From: dir, Status: "imported", Previous: imp.Previous}
				switch {
				case imp.Unchanged:
					e.Status, e.Previous = "unchanged", ""
				case imp.Previous != "":
					e.Status = "replaced"
				}
				report = append(report, e)
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				return writeSuiteJSON(out, report)
			}
			for _, e := range report {
				line := fmt.Sprintf("%s %s (%s) from %s", e.Status, e.ID, e.Hash[:12], e.From)
				if e.Status == "replaced" {
					line += fmt.Sprintf(", was %s", e.Previous[:12])
				}
				if _, err := fmt.Fprintln(out, line); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(out, "%d tasks in %s\n", len(report), s.Dir)
			return err
		},
	}
	f.add(cmd, "print a JSON list of {id, hash, from, status, previous}")
	cmd.Flags().BoolVar(&replace, "replace", false, "point an id already imported at the new files")
	return cmd
}

// tasksListEntry is one element of wmrl tasks list --json.
type tasksListEntry struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Kind        string `json:"kind"`
	Metric      string `json:"metric"`
	Direction   string `json:"direction"`
	TrainRows   int    `json:"train_rows"`
	TestRows    int    `json:"test_rows"`
	Features    int    `json:"features"`
	Leaderboard int    `json:"leaderboard"` // rows of leaderboard.csv
	Hash        string `json:"hash"`
}

func newTasksListCmd() *cobra.Command {
	var f tasksFlags
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the imported tasks",
		Long: `list prints every imported task in id order: id, kind, metric and its
direction, train and test rows, features, the size of its leaderboard, the
start of its hash and its title. Each task's files are checked against its
hash.

--json prints a list of {id, title, kind, metric, direction, train_rows,
test_rows, features, leaderboard, hash}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.store()
			if err != nil {
				return err
			}
			list, err := s.List()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				entries := make([]tasksListEntry, len(list))
				for i, t := range list {
					entries[i] = tasksListEntry{ID: t.Spec.ID, Title: t.Spec.Title, Kind: string(t.Spec.Kind),
						Metric: string(t.Spec.Metric), Direction: string(t.Spec.Direction), TrainRows: t.TrainRows,
						TestRows: t.TestRows, Features: t.Features, Leaderboard: len(t.Leaderboard), Hash: t.Hash}
				}
				return writeSuiteJSON(out, entries)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tMETRIC\tTRAIN\tTEST\tFEATURES\tPANEL\tHASH\tTITLE")
			for _, t := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%d\t%d\t%d\t%d\t%s\t%s\n", t.Spec.ID, t.Spec.Kind, t.Spec.Metric,
					t.Spec.Direction, t.TrainRows, t.TestRows, t.Features, len(t.Leaderboard), t.Hash[:12], t.Spec.Title)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%d tasks in %s\n", len(list), s.Dir)
			return err
		},
	}
	f.add(cmd, "print a JSON list of {id, title, kind, metric, direction, train_rows, test_rows, features, leaderboard, hash}")
	return cmd
}

// tasksShowReport is wmrl tasks show --json.
type tasksShowReport struct {
	ID          string        `json:"id"`
	Title       string        `json:"title"`
	Kind        string        `json:"kind"`
	Metric      string        `json:"metric"`
	Direction   string        `json:"direction"`
	TimeLimit   string        `json:"time_limit"`
	MemoryLimit string        `json:"memory_limit"`
	CPUs        float64       `json:"cpus"`
	IDColumn    string        `json:"id_column"`
	Target      string        `json:"target"`
	Labels      []string      `json:"labels,omitempty"`
	Source      string        `json:"source"`
	License     string        `json:"license,omitempty"`
	Seed        *uint64       `json:"seed,omitempty"`
	TrainRows   int           `json:"train_rows"`
	TestRows    int           `json:"test_rows"`
	Features    int           `json:"features"`
	Hash        string        `json:"hash"`
	Dir         string        `json:"dir"`
	Files       []tasks.File  `json:"files"`
	Leaderboard []tasks.Entry `json:"leaderboard"`
	Description string        `json:"description"`
}

func newTasksShowCmd() *cobra.Command {
	var f tasksFlags
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show an imported task: its spec, files, leaderboard and description",
		Long: `show prints one imported task: its spec (kind, metric, limits, columns,
labels, source), its hash and directory in the store, its files, its
leaderboard (best first) and its description.

--json prints one object: id, title, kind, metric, direction, time_limit,
memory_limit, cpus, id_column, target, labels, source, license, seed,
train_rows, test_rows, features, hash, dir, files, leaderboard,
description.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := f.task(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				sp := t.Spec
				lb := t.Leaderboard
				if lb == nil {
					lb = []tasks.Entry{}
				}
				return writeSuiteJSON(out, tasksShowReport{
					ID: sp.ID, Title: sp.Title, Kind: string(sp.Kind), Metric: string(sp.Metric), Direction: string(sp.Direction),
					TimeLimit: sp.TimeLimit.String(), MemoryLimit: tasks.FormatMemory(sp.MemoryLimit), CPUs: sp.CPUs,
					IDColumn: sp.IDColumn, Target: sp.Target, Labels: sp.Labels, Source: sp.Source, License: sp.License, Seed: sp.Seed,
					TrainRows: t.TrainRows, TestRows: t.TestRows, Features: t.Features, Hash: t.Hash, Dir: t.Dir,
					Files: t.Files, Leaderboard: lb, Description: t.Description,
				})
			}
			return writeRealTask(out, t)
		},
	}
	f.add(cmd, "print the task as one JSON object")
	return cmd
}

// writeRealTask prints an imported task for people.
func writeRealTask(w io.Writer, t *tasks.Task) error {
	sp := t.Spec
	fmt.Fprintf(w, "task      %s: %s\n", sp.ID, sp.Title)
	fmt.Fprintf(w, "kind      %s; metric %s (%s)\n", sp.Kind, sp.Metric, sp.Direction)
	fmt.Fprintf(w, "limits    %v, %s, %g CPUs\n", sp.TimeLimit, tasks.FormatMemory(sp.MemoryLimit), sp.CPUs)
	fmt.Fprintf(w, "data      %d train rows, %d test rows, %d features; id column %s, target %s\n",
		t.TrainRows, t.TestRows, t.Features, sp.IDColumn, sp.Target)
	if len(sp.Labels) > 0 {
		fmt.Fprintf(w, "labels    %s\n", strings.Join(sp.Labels, ", "))
	}
	fmt.Fprintf(w, "source    %s\n", sp.Source)
	if sp.License != "" {
		fmt.Fprintf(w, "license   %s\n", sp.License)
	}
	if sp.Seed != nil {
		fmt.Fprintf(w, "seed      %d\n", *sp.Seed)
	}
	fmt.Fprintf(w, "hash      %s\n", t.Hash)
	fmt.Fprintf(w, "dir       %s\n", t.Dir)
	fmt.Fprintln(w, "\nfiles")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range t.Files {
		fmt.Fprintf(tw, "  %s\t%d bytes\n", f.Path, f.Size)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Leaderboard) == 0 {
		fmt.Fprintln(w, "\nleaderboard: empty (the reference panel has not run)")
	} else {
		fmt.Fprintf(w, "\nleaderboard (%d solutions, best first)\n", len(t.Leaderboard))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for i, e := range t.Leaderboard {
			fmt.Fprintf(tw, "  %d\t%s\t%.6g\n", i+1, e.Solution, e.Score)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\ndescription.md\n%s", t.Description)
	if err == nil && !strings.HasSuffix(t.Description, "\n") {
		_, err = fmt.Fprintln(w)
	}
	return err
}

// maxSubmission bounds a submission file (a few columns per test row).
const maxSubmission = 64 << 20

// tasksGradeReport is wmrl tasks grade --json.
type tasksGradeReport struct {
	ID        string  `json:"id"`
	Hash      string  `json:"hash"`
	Metric    string  `json:"metric"`
	Direction string  `json:"direction"`
	Score     float64 `json:"score"`
	// Rank is the submission's place among the leaderboard's solutions
	// (1: better than or equal to every one); 0 when the leaderboard is
	// empty.
	Rank        int `json:"rank"`
	Leaderboard int `json:"leaderboard"`
}

func newTasksGradeCmd() *cobra.Command {
	var f tasksFlags
	cmd := &cobra.Command{
		Use:   "grade ID SUBMISSION.csv [--json]",
		Short: "Score a submission against an imported task's private answers",
		Long: `grade checks a submission (the columns of the task's sample_submission.csv,
one row per test id, in any order) and scores it against the task's private
answers with the task's metric, and places it on the task's leaderboard. A
malformed submission is refused naming the column and the line.

--json prints one object: id, hash, metric, direction, score, rank,
leaderboard.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := f.task(args[0])
			if err != nil {
				return err
			}
			sub, err := readFileMax(args[1], maxSubmission)
			if err != nil {
				return fmt.Errorf("submission: %w", err)
			}
			score, err := t.Grade(sub)
			if err != nil {
				return fmt.Errorf("submission %s: %w", args[1], err)
			}
			r := tasksGradeReport{ID: t.Spec.ID, Hash: t.Hash, Metric: string(t.Spec.Metric),
				Direction: string(t.Spec.Direction), Score: score, Leaderboard: len(t.Leaderboard)}
			if len(t.Leaderboard) > 0 {
				r.Rank = 1
				for _, e := range t.Leaderboard {
					if t.Spec.Direction.Better(e.Score, score) {
						r.Rank++
					}
				}
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				return writeSuiteJSON(out, r)
			}
			line := fmt.Sprintf("%s %s %.6g (%s)", r.ID, r.Metric, r.Score, r.Direction)
			if r.Rank > 0 {
				line += fmt.Sprintf("; rank %d of %d reference solutions + 1", r.Rank, r.Leaderboard)
			}
			_, err = fmt.Fprintln(out, line)
			return err
		},
	}
	f.add(cmd, "print one JSON object: id, hash, metric, direction, score, rank, leaderboard")
	return cmd
}
