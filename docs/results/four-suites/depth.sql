-- per run: the held-out programs' family/depth mix at the final evaluation, and the training executions' CPU per execution in steps 20-29
with ev as (
  select run_id, count(*) n,
    sum(case when program ~ 'gbt' then 1 else 0 end) gbt,
    avg(case when program ~ 'gbt' then substring(program from 'depth=([0-9]+)')::int end) depth,
    avg(case when program ~ 'gbt' then substring(program from 'trees=([0-9]+)')::int end) trees
  from evaluations where step = 30 group by run_id),
tr as (
  select run_id, count(*) ex, sum(cpu_seconds) cpu,
    avg(case when program ~ 'gbt' then substring(program from 'depth=([0-9]+)')::int end) tdepth
  from trajectories where step >= 20 and env_score is not null group by run_id)
select ev.run_id, ev.gbt||'/'||ev.n, round(ev.depth,2), round(ev.trees,0), tr.ex, round((tr.cpu/tr.ex)::numeric,3), round(tr.tdepth,2)
from ev left join tr using (run_id) order by 1;
