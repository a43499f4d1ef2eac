package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
)

// source is who answers group g's turns (docs/design.md, "Multi-turn
// trajectories"): the real grader for the executed groups, the world
// model for the others in modes with one; "" for a group no environment
// answers (mode anchor's other groups, which are excluded and sample one
// single-shot action).
func (s *stepRun) source(g int, executed []int) activities.Source {
	if executed[g] >= 0 {
		return activities.SourceReal
	}
	if s.pc.WorldModel {
		return activities.SourceWorldModel
	}
	return ""
}

// turnRollout is the rollout of a multi-turn step (changeTurns): every
// group runs its K turns as a chain, turn t's Generate, then its answers
// (Execute × n for a real group, with ScoreWorldModel grading the turn in
// modes with a world model; ScoreWorldModel answering it for a world-model
// group), then turn t+1; after turn K, ReduceTurns writes the trajectories'
// rewards. From changeUnexecutedTurns on, the real turns that executed
// nothing are counted apart from the executions. The groups' chains run concurrently under the one parallelism
// bound; after the first failure nothing new starts and the step fails
// with that error.
func (s *stepRun) turnRollout(ctx workflow.Context) error {
	G, n, K := s.cfg.Groups, s.cfg.Samples, s.cfg.Trajectory.TurnCount()
	cap := s.cfg.Trajectory.ObservationCap()
	executed := make([]int, G) // position of a group among the executed ones, or -1
	for g := range executed {
		executed[g] = -1
	}
	groups := s.executedGroups()
	for k, g := range groups {
		executed[g] = k
	}
	// execs[k][t·n+i] is turn t+1 of sample i of executed group k.
	execs := make([][]activities.ExecuteResponse, len(groups))
	graded := make([][]bool, len(groups))
	for k := range execs {
		execs[k], graded[k] = make([]activities.ExecuteResponse, K*n), make([]bool, K*n)
	}
	rollout, wm, sb := withRollout(ctx), withWorldModel(ctx), s.sandboxOptions(ctx)
	apart := workflow.GetVersion(ctx, changeUnexecutedTurns, workflow.DefaultVersion, 1) >= 1
	loop := &s.res.Metrics.Stages.Turns
	s.begin(ctx, loop)
	defer s.end(ctx, loop)

	fan := &fanOut{limit: max(s.cfg.Parallelism, 1)}
	run := fan.run
	wg := workflow.NewWaitGroup(ctx)
	for g := range G {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			src := s.source(g, executed)
			turns := K
			if src == "" {
				turns = 0 // one single-shot Generate
			}
			for t := 1; t <= max(turns, 1); t++ {
				req := s.generateRequest(g)
				if src != "" {
					req.Turn, req.Source = t, src
				}
				ok := run(ctx, func() workflow.Future {
					return activities.Generate.Execute(s.turnCtx(rollout, "g%d turn %d: %d samples from checkpoint %d",
						g, t, n, s.sampler().Version), req)
				}, func(f workflow.Future) error {
					if err := f.Get(ctx, s.genInto(g)); err != nil {
						return fmt.Errorf("generate group %d turn %d: %w", g, t, err)
					}
					return nil
				})
				if !ok || src == "" {
					return
				}
				inner := workflow.NewWaitGroup(ctx)
				if s.pc.WorldModel {
					inner.Add(1)
					workflow.Go(ctx, func(ctx workflow.Context) {
						defer inner.Done()
						req := s.scoreRequest(g)
						req.Turn, req.ObservationTokens = t, cap
						run(ctx, func() workflow.Future {
							return activities.ScoreWorldModel.Execute(s.turnCtx(wm, "g%d turn %d: %d programs %s",
								g, t, n, taskOf(s.gen, g)), req)
						}, func(f workflow.Future) error {
							if err := f.Get(ctx, nil); err != nil {
								return fmt.Errorf("score group %d turn %d: %w", g, t, err)
							}
							return nil
						})
					})
				}
				if k := executed[g]; k >= 0 {
					for i := range n {
						inner.Add(1)
						workflow.Go(ctx, func(ctx workflow.Context) {
							defer inner.Done()
							j := (t-1)*n + i
							req := s.executeRequest(g, i)
							req.Turn, req.ObservationTokens = t, cap
							run(ctx, func() workflow.Future {
								return activities.Execute.Execute(summarized(sb, s.ui, "g%d/s%d turn %d %s", g, i, t, taskOf(s.gen, g)), req)
							}, func(f workflow.Future) error {
								var err error
								graded[k][j], err = s.executeDone(g, i, f.Get(ctx, &execs[k][j]))
								return err
							})
						})
					}
				}
				inner.Wait(ctx)
				if fan.first != nil {
					return
				}
			}
			req := activities.ReduceTurnsRequest{RunID: s.in.RunID, Step: s.in.Step, Group: g, Turns: K,
				Reward: s.cfg.Trajectory.Reduction()}
			run(ctx, func() workflow.Future {
				lctx := s.turnLocalCtx(withLocalControl(ctx, s.cfg), "g%d: %s over %d turns", g, req.Reward, K)
				return activities.ReduceTurns.ExecuteLocal(lctx, req).Future
			}, func(f workflow.Future) error {
				if err := f.Get(ctx, nil); err != nil {
					return fmt.Errorf("reduce group %d's turns: %w", g, err)
				}
				return nil
			})
		})
	}
	wg.Wait(ctx)
	if fan.first != nil {
		return fan.first
	}
	for k := range execs {
		s.countExecutions(execs[k], graded[k], apart)
	}
	return nil
}

// turnCtx and turnLocalCtx carry the summary of a turn's activity, the
// step first (an Execute's names its trajectory and turn only, as a
// single-shot Execute's names its trajectory: "g3/s5 turn 2 clf-sparse-042").
func (s *stepRun) turnCtx(ctx workflow.Context, format string, args ...any) workflow.Context {
	return summarized(ctx, s.ui, "step %d "+format, append([]any{s.in.Step}, args...)...)
}

func (s *stepRun) turnLocalCtx(ctx workflow.Context, format string, args ...any) workflow.Context {
	return summarizedLocal(ctx, s.ui, "step %d "+format, append([]any{s.in.Step}, args...)...)
}
