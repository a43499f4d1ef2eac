#!/usr/bin/env bash
# make demo: the whole local stack on one machine, then a short WMRL run on the
# built-in suite, followed to the end.
#
#   1. Postgres (installed and started if missing; deploy/postgres.sh)
#   2. a Temporal dev server with the Web UI (deploy/temporal.sh; built once and
#      cached). Set TEMPORAL_ADDRESS to use an existing cluster instead.
#   3. bin/wmrl, bin/wmrl-worker, bin/wmrl-executor; the schema (wmrl migrate)
#   4. the Python sandbox image (deploy/pyimage.sh) when a Docker engine answers
#   5. one wmrl-worker serving every task queue (Docker sandbox when an engine
#      answers, the process sandbox otherwise; the Python sandbox too, through
#      its --backends file), logging to .cache/demo/worker.log; demo.sh waits
#      until it logs "worker ready" (the first start builds the suite: minutes
#      on 2 cores), saying every 15 s what it waits for, for up to
#      WMRL_DEMO_WORKER_WAIT seconds (default 1800)
#   6. wmrl run --preset demo
#
# Everything keeps running afterwards so the run can be browsed in the UI;
# `make demo-stop` stops the worker and the dev server.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
state=$root/.cache/demo
mkdir -p "$state"
say() { printf '\n== %s\n' "$*"; }

# wait_for_worker PID LOG LIMIT: wait until the worker logs "worker ready",
# saying every 15 s what it is doing (building the suite, after "loading
# suite"); fail with the log's tail if it exits or is not ready within LIMIT
# seconds.
wait_for_worker() {
	local pid=$1 log=$2 limit=$3 start=$SECONDS next=15 what
	until grep -q 'worker ready' "$log" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$log" >&2
			echo "demo.sh: the worker exited before it was ready (log: $log)" >&2
			return 1
		fi
		if ((SECONDS - start >= limit)); then
			tail -n 20 "$log" >&2
			echo "demo.sh: the worker is not ready after ${limit}s (log: $log; WMRL_DEMO_WORKER_WAIT sets the limit)" >&2
			return 1
		fi
		if ((SECONDS - start >= next)); then
			what="starting"
			if grep -q 'loading suite' "$log" 2>/dev/null; then
				what="building the built-in suite; the first start on a machine takes minutes"
			fi
			echo "waiting for the worker to be ready: $what ($((SECONDS - start))s)..."
			next=$((next + 15))
		fi
		sleep 1
	done
	echo "worker ready after $((SECONDS - start))s"
}

cmd_stop() {
	if [[ -f $state/worker.pid ]] && kill -0 "$(<"$state/worker.pid")" 2>/dev/null; then
		kill -TERM "$(<"$state/worker.pid")"
		echo "demo.sh: stopped the worker"
	fi
	rm -f "$state/worker.pid"
	bash deploy/temporal.sh stop
}

if [[ ${1:-} == stop ]]; then
	cmd_stop
	exit 0
fi

say "Postgres"
WMRL_DATABASE_URL=$(bash deploy/postgres.sh)
export WMRL_DATABASE_URL
echo "database: $WMRL_DATABASE_URL"

say "Temporal dev server and Web UI"
bash deploy/temporal.sh start
export TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS:-127.0.0.1:7233}
ui_host=${TEMPORAL_ADDRESS%:*}
export WMRL_UI_URL=${WMRL_UI_URL:-http://$ui_host:${TEMPORAL_UI_PORT:-8233}}

say "Build and migrate"
make --no-print-directory build
bin/wmrl migrate

backends=()
if docker info >/dev/null 2>&1; then
	say "Python sandbox image (for sandbox.kind: python; built once, then a no-op)"
	py_image=$(bash deploy/pyimage.sh)
	printf 'sandbox:\n  python:\n    image: %s\n' "$py_image" >"$state/backends.yaml"
	backends=(--backends "$state/backends.yaml")
	echo "image: $py_image"
fi

say "Worker"
if [[ -f $state/worker.pid ]] && kill -0 "$(<"$state/worker.pid")" 2>/dev/null; then
	kill -TERM "$(<"$state/worker.pid")" # restart it: the binary may be new
	sleep 1
fi
export WMRL_DATA_DIR=${WMRL_DATA_DIR:-$root/.cache/demo/data}
nohup bin/wmrl-worker --executor "$root/bin/wmrl-executor" "${backends[@]}" >"$state/worker.log" 2>&1 </dev/null &
echo $! >"$state/worker.pid"
echo "worker pid $(<"$state/worker.pid"), log $state/worker.log"
wait_for_worker "$(<"$state/worker.pid")" "$state/worker.log" "${WMRL_DEMO_WORKER_WAIT:-1800}"

say "A short WMRL run on the built-in suite"
name=demo-$(date +%Y%m%d-%H%M%S)
bin/wmrl run --preset demo --name "$name"

say "Done"
cat <<MSG
See the run and each of its steps in the Temporal Web UI:
  $WMRL_UI_URL/namespaces/${TEMPORAL_NAMESPACE:-default}/workflows/$name
Inspect it from the command line:
  bin/wmrl status $name
  bin/wmrl inspect $name
The worker and the dev server keep running; stop them with: make demo-stop
MSG
