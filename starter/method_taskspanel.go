package main

import (
	"fmt"
	"path/filepath"
	"strconv"

	dockerclient "github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/pysandbox"
	"github.com/wmrl/wmrl/internal/tasks"
)

// tasksPanelEntry is one element of wmrl tasks panel --json.
type tasksPanelEntry struct {
	ID          string        `json:"id"`
	Dir         string        `json:"dir"`
	Leaderboard []tasks.Entry `json:"leaderboard"`
	// Failed maps a panel solution that got no row to its status and
	// detail.
	Failed map[string]string `json:"failed,omitempty"`
}

func newTasksPanelCmd() *cobra.Command {
	var (
		panelDir, image string
		parallel        int
		asJSON          bool
	)
	cmd := &cobra.Command{
		Use:   "panel DIR... [--panel DIR] [--image IMAGE] [--parallel N] [--json]",
		Short: "Run the reference panel on prepared task directories and write their leaderboards",
		Long: `panel runs every reference solution of the panel (--panel, default
deploy/pytasks/panel: one <name>.py each) on each prepared task directory, in
the Python sandbox (a Docker engine and the wmrl-python image: --image, default
the newest wmrl-python image the engine has; deploy/pyimage.sh builds it),
under the task's own limits, and writes the valid solutions' scores to the
directory's leaderboard.csv, best first. Run it before wmrl tasks import: the
store's copies are never changed. The same tasks, panel and image give the
same leaderboards.

  deploy/pytasks.sh prepare OUT
  wmrl tasks panel OUT/*
  wmrl tasks import OUT/*

--json prints a list of {id, dir, leaderboard, failed}.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if parallel < 1 {
				return usagef("--parallel: must be at least 1, got %d", parallel)
			}
			ctx := cmd.Context()
			panel, err := pysandbox.LoadPanel(panelDir)
			if err != nil {
				return err
			}
			var list []*tasks.Task
			for _, dir := range args {
				t, err := tasks.Load(dir)
				if err != nil {
					return err
				}
				list = append(list, t)
			}
			if image == "" {
				cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
				if err != nil {
					return fmt.Errorf("docker client: %w", err)
				}
				image, err = pysandbox.LatestImage(ctx, cli)
				cli.Close()
				if err != nil {
					return fmt.Errorf("--image: none given and %w (build one: deploy/pyimage.sh)", err)
				}
			}
			sb, err := pysandbox.New(ctx, pysandbox.Options{Image: image})
			if err != nil {
				return err
			}
			defer sb.Close()
			out := cmd.OutOrStdout()
			var report []tasksPanelEntry
			for _, t := range list {
				board, results, err := sb.RunPanel(ctx, t, panel, parallel)
				if err != nil {
					return err
				}
				if err := pysandbox.WriteLeaderboard(t.Dir, board); err != nil {
					return err
				}
				e := tasksPanelEntry{ID: t.Spec.ID, Dir: t.Dir, Leaderboard: board}
				for _, r := range results {
					if r.Result.Status != pysandbox.StatusValid {
						if e.Failed == nil {
							e.Failed = map[string]string{}
						}
						e.Failed[r.Solution] = string(r.Result.Status) + ": " + r.Result.Detail
					}
				}
				report = append(report, e)
				if !asJSON {
					best := "none valid"
					if len(board) > 0 {
						best = board[0].Solution + " " + strconv.FormatFloat(board[0].Score, 'g', 6, 64)
					}
					if _, err := fmt.Fprintf(out, "%s: %d of %d solutions on the leaderboard (best %s; %s) -> %s\n", t.Spec.ID,
						len(board), len(panel), best, t.Spec.Metric, filepath.Join(t.Dir, tasks.FileLeaderboard)); err != nil {
						return err
					}
				}
			}
			if asJSON {
				return writeSuiteJSON(out, report)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&panelDir, "panel", filepath.Join("deploy", "pytasks", "panel"), "directory of the panel's solutions (<name>.py)")
	cmd.Flags().StringVar(&image, "image", "", "the wmrl-python image (deploy/pyimage.sh prints it); empty: the newest the engine has")
	cmd.Flags().IntVar(&parallel, "parallel", 2, "panel solutions run at once, per task")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list of {id, dir, leaderboard, failed}")
	return cmd
}
