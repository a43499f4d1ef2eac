#!/usr/bin/env bash
# make bench: Go benchmarks of wmrl's hot paths, then isotonic.Fit side by
# side with scikit-learn's IsotonicRegression(out_of_bounds="clip").fit on the
# same data (internal/bench/isobench), failing if predictions differ by > 1e-9,
# then the cost of one execution against one world-model prediction, then
# wmrl's orchestration overhead on a Temporal dev server.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Debian's scikit-learn, for /usr/bin/python3 (the python3 first on PATH may
# be another interpreter without it).
PY=/usr/bin/python3
if ! "$PY" -c 'import sklearn' 2>/dev/null; then
	echo "bench: installing python3-sklearn (Debian package)" >&2
	SUDO=()
	if [ "$(id -u)" != 0 ]; then SUDO=(sudo); fi
	export DEBIAN_FRONTEND=noninteractive
	if ! "${SUDO[@]}" apt-get install -y python3-sklearn; then
		"${SUDO[@]}" apt-get update
		"${SUDO[@]}" apt-get install -y python3-sklearn
	fi
	"$PY" -c 'import sklearn' || { echo "bench: scikit-learn still not importable by $PY" >&2; exit 1; }
fi

# Run both parts even if the first fails, then fail if either did.
status=0
echo "== go test -bench (internal/...)"
go test -run '^$' -bench . -benchmem ./internal/... || status=$?

# One step of the tiny preset with the built-in backends in process and with
# the three remote backends over HTTP (Tinker API, chat completions, /grade)
# against the built-in pieces served locally: the wire's cost per step.
echo
echo "== backends in process vs over HTTP"
go test -run '^$' -bench StepBackends -benchtime 10x -count 3 ./activities || status=$?

# One Python solution in the Python sandbox (the wmrl-python image of
# deploy/pyimage.sh; skipped without an engine or image): a copy of the
# sample submission, an import of the libraries, a logistic regression.
echo
echo "== a Python solution in the Python sandbox"
go test -run '^$' -bench Grade -benchtime 5x ./internal/pysandbox || status=$?

echo
echo "== isotonic.Fit vs scikit-learn"
go run ./internal/bench/isobench -python "$PY" -script internal/bench/sklearn_iso.py "$@" || status=$?

# Execution vs world model (internal/bench/execbench): the median cost of one
# real execution per model family on suite tasks, in-process and through the
# process sandbox (a freshly built static executor), against one world-model
# prediction on the same programs.
echo
echo "== execution vs world model"
exe_dir=$(mktemp -d)
# The process sandbox runs the executor as another user: the directory must
# be searchable by it.
chmod 755 "$exe_dir"
orch_pid="" orch_db="" serve_pid=""
cleanup() {
	if [ -n "$serve_pid" ]; then
		kill "$serve_pid" 2>/dev/null || true
		wait "$serve_pid" 2>/dev/null || true
	fi
	if [ -n "$orch_pid" ]; then
		kill "$orch_pid" 2>/dev/null || true
		wait "$orch_pid" 2>/dev/null || true
	fi
	if [ -n "$orch_db" ]; then
		psql "$orch_admin" -XAtqc "DROP DATABASE IF EXISTS $orch_db WITH (FORCE)" >/dev/null 2>&1 || true
	fi
	rm -rf "$exe_dir"
}
trap cleanup EXIT
if CGO_ENABLED=0 go build -o "$exe_dir/wmrl-executor" ./internal/executor/wmrl-executor; then
	go run ./internal/bench/execbench -sandbox process -executor "$exe_dir/wmrl-executor" || status=$?
else
	status=1
fi

# Orchestration overhead (internal/bench/orchbench): short wmrl runs of 64,
# 256 (the default preset) and 1024 trajectories per step on a Temporal dev
# server of its own (a spare port, a SQLite file in a temporary directory,
# stopped at the end) and a temporary Postgres database, with every queue
# served in the driver's process; then each step's wall time against the time
# inside its activities, and the history sizes, from the histories.
echo
echo "== orchestration overhead"
orch() {
	local tbin=${WMRL_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/wmrl/bin}/temporal-dev
	if [ ! -x "$tbin" ]; then
		bash deploy/temporal.sh build || return 1
	fi
	local dsn port
	dsn=$(bash deploy/postgres.sh) || return 1
	orch_admin="$dsn dbname=postgres" # a later keyword wins
	orch_db="wmrl_orchbench_$$"
	psql "$orch_admin" -XAtqc "CREATE DATABASE $orch_db" >/dev/null || { orch_db=""; return 1; }
	port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$tbin" serve -db "$exe_dir/temporal.db" -port "$port" -http-port 0 -ui-port 0 >"$exe_dir/temporal.log" 2>&1 &
	orch_pid=$!
	if ! "$tbin" check -address "127.0.0.1:$port" -timeout 2m; then
		cat "$exe_dir/temporal.log" >&2
		return 1
	fi
	# 64, 256 and 1024 trajectories per step with the process sandbox, then
	# the default preset (256) with its default sandbox: Docker when an
	# engine answers, then 64 and 256 at K = 1 and K = 3 turns.
	local st=0
	TEMPORAL_ADDRESS="127.0.0.1:$port" WMRL_DATABASE_URL="$dsn dbname=$orch_db" \
		go run ./internal/bench/orchbench -executor "$exe_dir/wmrl-executor" -sizes 8x8,32x8,128x8 || st=$?
	echo
	TEMPORAL_ADDRESS="127.0.0.1:$port" WMRL_DATABASE_URL="$dsn dbname=$orch_db" \
		go run ./internal/bench/orchbench -executor "$exe_dir/wmrl-executor" -sizes 32x8 -sandbox auto || st=$?
	# A step of 3-turn trajectories (trajectory.turns: 3) beside the same
	# shape at 1 turn: step time and overhead at K = 1 and K = 3, as ratios
	# (the "Turns" table).
	echo
	TEMPORAL_ADDRESS="127.0.0.1:$port" WMRL_DATABASE_URL="$dsn dbname=$orch_db" \
		go run ./internal/bench/orchbench -executor "$exe_dir/wmrl-executor" -sizes 8x8,8x8x3,32x8,32x8x3 || st=$?
	# Throughput (internal/bench/pipebench): steps per hour with
	# pipeline.max_off_policy 0, 1 and 2 side by side, the three HTTP
	# backends against wmrl serve's handlers with service times that
	# emulate a GPU's update (--update-time) and a sandbox's executions
	# (--grade-time), so that the rollout and the update take comparable
	# time; a d the configuration refuses is reported as skipped.
	echo
	echo "== throughput: the asynchronous pipeline (d = 0, 1, 2)"
	pipe "$dsn dbname=$orch_db" "127.0.0.1:$port" || st=$?
	return "$st"
}
# pipe DSN TEMPORAL: wmrl serve with service times on a spare port, then
# pipebench against it.
pipe() {
	local dsn=$1 temporal=$2 sport i
	go build -o "$exe_dir/wmrl" ./starter || return 1
	sport=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$exe_dir/wmrl" serve --listen "127.0.0.1:$sport" --services grade,openai,tinker --sandbox process \
		--executor "$exe_dir/wmrl-executor" --capacity 4 --update-time 1.25s --grade-time 1s \
		--database-url "$dsn" >"$exe_dir/serve.log" 2>&1 &
	serve_pid=$!
	for i in $(seq 1 100); do
		if curl -fsS "http://127.0.0.1:$sport/health" >/dev/null 2>&1; then break; fi
		if ! kill -0 "$serve_pid" 2>/dev/null; then cat "$exe_dir/serve.log" >&2; return 1; fi
		sleep 0.2
	done
	TEMPORAL_ADDRESS="$temporal" WMRL_DATABASE_URL="$dsn" \
		go run ./internal/bench/pipebench -executor "$exe_dir/wmrl-executor" -serve "http://127.0.0.1:$sport" -steps 16 -d 0,1,2
}
if [ -x "$exe_dir/wmrl-executor" ]; then
	orch || status=$?
else
	status=1
fi
exit "$status"
