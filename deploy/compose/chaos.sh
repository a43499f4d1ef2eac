#!/usr/bin/env bash
# The chaos suite of the compose deployment (`make chaos`; not part of make test).
#
# It brings the deployment up (deploy/compose/up.sh), runs the demo preset once
# without faults (the baseline), then once per fault, each fault injected after
# the run has completed $WMRL_CHAOS_AFTER_STEP steps (default 3):
#
#   sandbox-kill      docker kill of sandbox worker 1 (sandbox-2 carries on)
#   gpu-kill          docker kill of the only GPU-queue worker, started again 10 s later
#   sandbox-partition sandbox worker 1 cut off the network for 60 s, then reconnected
#   temporal-restart  docker restart of the Temporal server
#   postgres-restart  docker restart of PostgreSQL
#   postgres-stop     PostgreSQL stopped for 30 s, then started
#   cli-kill          the CLI container following the run is killed
#   sandbox-pause     sandbox worker 1 frozen (docker pause) for 90 s, then unpaused
#   control-kill      docker kill of the only control worker (workflows, generation,
#                     world model), started again 10 s later
#   postgres-kill     PostgreSQL SIGKILLed (docker kill), started again at once: crash recovery
#   all-kill          every worker killed at once, all started again 30 s later
#   volume-full       the data volume full for 150 s ($WMRL_CHAOS_FULL_SECONDS): a file
#                     takes every free block, then is removed. The volume is then a
#                     filesystem of its own, $WMRL_CHAOS_DATA_MB (1024) MB in an image file
#                     under ~/.cache/wmrl/chaos, loop-mounted at $WMRL_CHAOS_DATA_DIR
#                     and bound to every role's /data (data-dir.yml), so the host's disk
#                     never fills; it needs root (mount). `umount` it after a purge.
#
# For each it prints one line: whether the run completed by itself, its final
# checkpoint hash against the baseline's, whether its rows (steps, trajectories,
# anchor pairs, checkpoints, evaluations) are as many as the baseline's, and the
# wall time lost against the baseline (which is run again at the end: the
# difference of the two is the noise of that column). A different hash would mean a step
# trained twice or on other data; the primary keys refuse duplicate rows.
#
#   WMRL_CHAOS_FAULTS="sandbox-kill temporal-restart" make chaos   # a subset
#   WMRL_CHAOS_PRESET=tiny                                         # a shorter run
#
#   deploy/compose/chaos.sh load    the load test instead: one run of the tiny preset ($WMRL_LOAD_PRESET)
#                                   alone, then $WMRL_LOAD_RUNS (16) at once; steps per
#                                   minute and step latency (p50, p99) of both, from
#                                   the steps' start and end times in Postgres, and where
#                                   it saturates: each container's CPU and each task
#                                   queue's backlog while the runs ran
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
project=${WMRL_COMPOSE_PROJECT:-wmrl-deploy}
preset=${WMRL_CHAOS_PRESET:-demo}
after=${WMRL_CHAOS_AFTER_STEP:-3}
faults=${WMRL_CHAOS_FAULTS:-sandbox-kill gpu-kill sandbox-partition temporal-restart postgres-restart postgres-stop cli-kill sandbox-pause control-kill postgres-kill all-kill volume-full}
deadline=${WMRL_CHAOS_RUN_TIMEOUT:-1800}
workers=(control sandbox-1 sandbox-2 gpu)
log() { echo "chaos: $*" >&2; }
dc() {
	local files=(-f "$here/docker-compose.yml")
	[[ -n ${WMRL_COMPOSE_DATA_DIR:-} ]] && files+=(-f "$here/data-dir.yml")
	docker-compose -p "$project" --project-directory "$here" "${files[@]}" "$@"
}
ctr() { dc ps -q "$1"; }

# data_fs: for volume-full, a filesystem of its own as the data volume: an
# ext4 image of $WMRL_CHAOS_DATA_MB MB (sparse, no blocks reserved for root),
# loop-mounted at $WMRL_CHAOS_DATA_DIR and owned by the workers' uid; up.sh
# and dc bind it to /data (WMRL_COMPOSE_DATA_DIR).
data_fs() {
	local base=${XDG_CACHE_HOME:-$HOME/.cache}/wmrl/chaos
	local dir=${WMRL_CHAOS_DATA_DIR:-$base/data} img=$base/data-${WMRL_CHAOS_DATA_MB:-1024}m.img
	export WMRL_COMPOSE_DATA_DIR=$dir
	mountpoint -q "$dir" && return
	if [[ $(id -u) != 0 ]]; then
		log "volume-full needs root to mount the data volume's own filesystem (or mount one at $dir)"
		exit 2
	fi
	mkdir -p "$dir"
	if [[ ! -f $img ]]; then
		truncate -s "${WMRL_CHAOS_DATA_MB:-1024}M" "$img.tmp"
		mkfs.ext4 -q -m 0 "$img.tmp"
		mv "$img.tmp" "$img"
	fi
	mount -o loop "$img" "$dir"
	chown 65534:65534 "$dir"
	log "data volume: $img on $dir ($(df -h --output=size "$dir" | tail -1 | tr -d ' '))"
}
[[ " $faults " == *" volume-full "* ]] && data_fs

# status RUN: the run's status as JSON, or nothing while it cannot be read.
status() { dc run --rm -T cli status "$1" --json 2>/dev/null || true; }
field() { python3 -c 'import json,sys
try: d=json.load(sys.stdin)
except Exception: sys.exit(0)
v=d
for k in sys.argv[1].split("."):
    v=v.get(k) if isinstance(v,dict) else None
print("" if v is None else v)' "$1"; }

rows() {
	docker exec -i "$(ctr postgres)" psql -qAt -U postgres -d wmrl -v run="$1" <<'SQL' | tr '\n' ' '
SELECT (SELECT count(*) FROM steps WHERE run_id = :'run') || '/' ||
       (SELECT count(*) FROM trajectories WHERE run_id = :'run') || '/' ||
       (SELECT count(*) FROM anchor_pairs WHERE run_id = :'run') || '/' ||
       (SELECT count(*) FROM checkpoints WHERE run_id = :'run') || '/' ||
       (SELECT count(*) FROM evaluations WHERE run_id = :'run');
SQL
}

inject() {
	case $1 in
	none) ;;
	sandbox-kill) docker kill "$(ctr sandbox-1)" >/dev/null ;;
	gpu-kill)
		docker kill "$(ctr gpu)" >/dev/null
		sleep 10
		docker start "$(ctr gpu)" >/dev/null
		;;
	sandbox-partition)
		docker network disconnect "${project}_wmrl" "$(ctr sandbox-1)"
		sleep 60
		docker network connect "${project}_wmrl" "$(ctr sandbox-1)"
		;;
	temporal-restart) docker restart "$(ctr temporal)" >/dev/null ;;
	postgres-restart) docker restart "$(ctr postgres)" >/dev/null ;;
	postgres-stop)
		docker stop "$(ctr postgres)" >/dev/null
		sleep 30
		docker start "$(ctr postgres)" >/dev/null
		;;
	cli-kill) docker kill "$project-follow" >/dev/null ;;
	sandbox-pause)
		docker pause "$(ctr sandbox-1)" >/dev/null
		sleep 90
		docker unpause "$(ctr sandbox-1)" >/dev/null
		;;
	control-kill)
		docker kill "$(ctr control)" >/dev/null
		sleep 10
		docker start "$(ctr control)" >/dev/null
		;;
	postgres-kill)
		docker kill "$(ctr postgres)" >/dev/null
		docker start "$(ctr postgres)" >/dev/null
		;;
	all-kill)
		local ids=()
		for s in "${workers[@]}"; do ids+=("$(ctr "$s")"); done
		docker kill "${ids[@]}" >/dev/null
		sleep 30
		docker start "${ids[@]}" >/dev/null
		;;
	volume-full)
		local dir=$WMRL_COMPOSE_DATA_DIR
		# Every free block: fallocate the bulk, then write until ENOSPC.
		fallocate -l "$(df --output=avail -B1 "$dir" | tail -1)" "$dir/chaos-fill" 2>/dev/null || true
		dd if=/dev/zero of="$dir/chaos-fill-rest" bs=64k 2>/dev/null || true
		log "data volume full: $(df --output=avail -B1 "$dir" | tail -1 | tr -d ' ') bytes free"
		sleep "${WMRL_CHAOS_FULL_SECONDS:-150}"
		rm -f "$dir/chaos-fill" "$dir/chaos-fill-rest"
		;;
	*)
		log "unknown fault $1"
		exit 2
		;;
	esac
}

# one FAULT: runs the preset with FAULT injected; prints "hash rows seconds state".
one() {
	local fault=$1 run="chaos-$1-$(date +%s)" t0=$SECONDS st step state=
	dc run --rm -T cli run --preset "$preset" --name "$run" --detach >/dev/null
	# The CLI that follows the run (the one cli-kill kills).
	docker rm -f "$project-follow" >/dev/null 2>&1 || true
	dc run -d --name "$project-follow" cli status "$run" --follow >/dev/null
	if [[ $fault != none ]]; then
		while :; do
			step=$(status "$run" | field step)
			[[ ${step:-0} -ge $after ]] && break
			((SECONDS - t0 > deadline)) && break
			sleep 2
		done
		log "$run: step ${step:-?}: injecting $fault"
		inject "$fault"
	fi
	while ((SECONDS - t0 <= deadline)); do
		st=$(status "$run")
		state=$(field state <<<"$st")
		[[ $state == completed || $state == failed || $state == terminated ]] && break
		sleep 3
	done
	local secs=$((SECONDS - t0))
	# Leave the deployment whole for the next fault.
	docker unpause "$(ctr sandbox-1)" >/dev/null 2>&1 || true
	for s in postgres "${workers[@]}"; do docker start "$(ctr "$s")" >/dev/null 2>&1 || true; done
	docker rm -f "$project-follow" >/dev/null 2>&1 || true
	echo "$(field checkpoint.hash <<<"$st" | cut -c1-12) $(rows "$run")$secs ${state:-unknown}"
}

# psql_wmrl SQL: one query in wmrl's database, unaligned.
psql_wmrl() { docker exec -i "$(ctr postgres)" psql -qAt -F ' ' -U postgres -d wmrl -c "$1"; }

# load_stats PREFIX: the runs' wall seconds (their first step's start to
# their last step's end, as Postgres recorded them), their steps, steps per
# minute over that wall time, and the step latencies.
load_stats() {
	psql_wmrl "SELECT round(extract(epoch FROM max(finished_at) - min(started_at))::numeric, 1), count(*),
		round(count(*) * 60.0 / extract(epoch FROM max(finished_at) - min(started_at))::numeric, 1),
		round(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))::numeric, 2),
		round(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))::numeric, 2)
		FROM steps WHERE run_id LIKE '$1%' AND status = 'completed'"
}

# sample FILE: until killed, every 5 s appends one line per container (its
# CPU % from docker stats) and per task queue (the age of its oldest waiting
# task, from the Web UI's HTTP API), to tell where the load saturates.
sample() {
	local ui="http://127.0.0.1:${WMRL_COMPOSE_UI_PORT:-18233}/api/v1/namespaces/default/task-queues" q kind age
	while :; do
		# The services only: the short-lived cli containers come and go, and
		# docker stats fails on one gone (with pipefail, hence the || true).
		docker stats --no-stream --format '{{.Name}} {{.CPUPerc}}' \
			$(dc ps -q postgres temporal control sandbox-1 sandbox-2 gpu) 2>/dev/null |
			sed -E "s/^${project}_([a-z0-9-]+)_[0-9]+ /cpu \1 /; s/^${project}-([a-z]+) /cpu cli-\1 /; s/%$//" >>"$1" || true
		for q in control rollout worldmodel sandbox gpu; do
			for kind in WORKFLOW ACTIVITY; do
				age=$(curl -fsS "$ui/wmrl-$q?taskQueueType=TASK_QUEUE_TYPE_$kind&reportStats=true" 2>/dev/null |
					python3 -c 'import json,sys
try: a=json.load(sys.stdin).get("stats",{}).get("approximateBacklogAge","0s")
except Exception: sys.exit(0)
print(float(a.rstrip("s") or 0))') || true
				[[ -n $age ]] && echo "backlog $q/${kind,,} $age" >>"$1"
			done
		done
		sleep 5
	done
}

# saturation FILE: the mean and peak CPU % of each container and the peak
# backlog age of each task queue over the samples, busiest first.
saturation() {
	python3 - "$1" <<'PY'
import collections, sys
cpu, backlog = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    try:
        kind, name, value = line.split()
        v = float(value)
    except ValueError: continue
    (cpu if kind == "cpu" else backlog)[name].append(v)
print("| container | mean CPU % | peak CPU % |\n|---|---:|---:|")
for n, v in sorted(cpu.items(), key=lambda kv: -sum(kv[1]) / len(kv[1])):
    print(f"| {n} | {sum(v)/len(v):.0f} | {max(v):.0f} |")
print("\n| task queue | peak backlog age s | samples with a backlog |\n|---|---:|---:|")
for n, v in sorted(backlog.items(), key=lambda kv: -max(kv[1])):
    print(f"| {n} | {max(v):.1f} | {sum(1 for x in v if x > 0)}/{len(v)} |")
PY
}

load() {
	local n=${WMRL_LOAD_RUNS:-16} lp=${WMRL_LOAD_PRESET:-tiny} stamp t0 ndone=0 wall1 walln samples sampler
	bash "$here/up.sh" up
	stamp=$(date +%s)
	log "warm-up and single run: $lp preset"
	dc run --rm -T cli run --preset "$lp" --name "load-warmup-$stamp" >/dev/null
	t0=$SECONDS
	dc run --rm -T cli run --preset "$lp" --name "load1-$stamp" >/dev/null
	wall1=$((SECONDS - t0))
	log "$n $lp runs at once"
	samples=$(mktemp)
	sample "$samples" &
	sampler=$!
	t0=$SECONDS
	local launchers=()
	for i in $(seq 1 "$n"); do
		dc run --rm -T cli run --preset "$lp" --name "load$n-$stamp-$i" --detach --skip-preflight >/dev/null &
		launchers+=($!)
	done
	wait "${launchers[@]}"
	while ((SECONDS - t0 <= deadline)); do
		ndone=$(psql_wmrl "SELECT count(*) FROM runs WHERE id LIKE 'load$n-$stamp-%' AND state = 'completed'")
		((ndone >= n)) && break
		sleep 3
	done
	walln=$((SECONDS - t0))
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	printf '| runs at once | completed | command wall s | steps wall s | steps | steps/min | step latency p50 s | p99 s |\n|---|---|---|---|---|---|---|---|\n'
	read -r w c spm p50 p99 < <(load_stats "load1-$stamp")
	printf '| 1 | 1/1 | %s | %s | %s | %s | %s | %s |\n' "$wall1" "$w" "$c" "$spm" "$p50" "$p99"
	read -r w c spm p50 p99 < <(load_stats "load$n-$stamp-")
	printf '| %s | %s/%s | %s | %s | %s | %s | %s | %s |\n' "$n" "$ndone" "$n" "$walln" "$w" "$c" "$spm" "$p50" "$p99"
	printf '\n(command wall: from the first start command to the last run seen completed,\nthe containers of docker-compose run included; steps wall: first step start to last step end)\n'
	printf '\nWhile the %s runs ran (a sample every 5 s):\n\n' "$n"
	saturation "$samples"
	rm -f "$samples"
	((ndone >= n))
}
if [[ ${1:-} == load ]]; then
	load
	exit
fi

bash "$here/up.sh" up
# A warm-up run, not measured: each worker builds the suite on its first
# task (tens of seconds), which would otherwise be charged to the baseline.
log "warm-up: a tiny run"
dc run --rm -T cli run --preset tiny --name "chaos-warmup-$(date +%s)" >/dev/null
read -r base_hash base_rows base_secs base_state < <(one none)
log "baseline: $base_state, checkpoint $base_hash, rows $base_rows, ${base_secs}s"
printf '| fault | completed by itself | checkpoint | same as baseline | rows steps/traj/pairs/ckpt/evals | time lost |\n|---|---|---|---|---|---|\n'
printf '| none (baseline) | %s | %s | - | %s | %ss in all |\n' "$base_state" "$base_hash" "$base_rows" "$base_secs"
bad=0
for f in $faults; do
	read -r hash rows secs state < <(one "$f")
	same=yes
	[[ $hash == "$base_hash" && $rows == "$base_rows" && $state == completed ]] || { same=NO; bad=1; }
	printf '| %s | %s | %s | %s | %s | %+ds |\n' "$f" "$state" "$hash" "$same" "$rows" $((secs - base_secs))
done
# The baseline again: how much a run's wall time varies without a fault, the
# noise of the "time lost" column.
read -r hash rows secs state < <(one none)
same=yes
[[ $hash == "$base_hash" && $rows == "$base_rows" && $state == completed ]] || { same=NO; bad=1; }
printf '| none (again) | %s | %s | %s | %s | %+ds |\n' "$state" "$hash" "$same" "$rows" $((secs - base_secs))
exit $bad
