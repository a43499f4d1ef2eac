#!/usr/bin/env bash
# orchcompare.sh BASE [ROUNDS] [SIZES]: the orchestration overhead of this
# checkout against commit BASE, side by side. It builds orchbench from both
# (BASE in a temporary git worktree), then alternates ROUNDS runs of each
# (default 3; SIZES default 32x8, the default preset's 256 trajectories per
# step, process sandbox) against the Temporal server at $TEMPORAL_ADDRESS
# (default 127.0.0.1:7233; deploy/temporal.sh start), each in a namespace and
# a Postgres database of its own, and prints each run's totals line. Rounds
# alternate so that a change of the machine's load hits both sides alike.
set -euo pipefail
export PGOPTIONS="--client-min-messages=warning"
cd "$(dirname "$0")/../.."
base=${1:?usage: orchcompare.sh BASE [ROUNDS] [SIZES]}
rounds=${2:-3}
sizes=${3:-32x8}
addr=${TEMPORAL_ADDRESS:-127.0.0.1:7233}
dsn=$(bash deploy/postgres.sh)
work=$(mktemp -d /tmp/orchcompare.XXXXXX)
chmod 755 "$work"
cleanup() {
	git worktree remove --force "$work/base" >/dev/null 2>&1 || true
	for side in base head; do
		psql "$dsn dbname=postgres" -XAtqc "DROP DATABASE IF EXISTS wmrl_orchcmp_$side" >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
git worktree add -q --detach "$work/base" "$base"
(cd "$work/base" && go build -o "$work/orch-base" ./internal/bench/orchbench)
go build -o "$work/orch-head" ./internal/bench/orchbench
CGO_ENABLED=0 go build -o "$work/wmrl-executor" ./internal/executor/wmrl-executor
for side in base head; do
	psql "$dsn dbname=postgres" -XAtqc "DROP DATABASE IF EXISTS wmrl_orchcmp_$side" -c "CREATE DATABASE wmrl_orchcmp_$side" >/dev/null
done
echo "orchestration overhead, $(git rev-parse --short "$base") (base) against $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes') (head), $rounds rounds of $sizes, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
	for side in base head; do
		line=$("$work/orch-$side" -executor "$work/wmrl-executor" -sizes "$sizes" -address "$addr" \
			-namespace "wmrl-orchcmp-$side" -database-url "$dsn dbname=wmrl_orchcmp_$side" 2>&1 |
			grep -E "^  [0-9]+x[0-9]+ +[0-9]+ +[0-9]+ " | head -1)
		echo "round $r $side: $line"
	done
done
echo "columns: size trajectories steps activities/step wall in-activities overhead overhead% queue-wait workflow-task (task-queued) other ..."
