#!/usr/bin/env bash
# Local Temporal dev server for wmrl (deploy/devserver): build it once, start, stop.
#
#   deploy/temporal.sh build    build .cache/bin/temporal-dev unless it is up to date
#   deploy/temporal.sh start    start it in the background unless $TEMPORAL_ADDRESS answers
#   deploy/temporal.sh stop     stop the server this script started
#   deploy/temporal.sh status   say whether it runs
#
# Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE (default),
# TEMPORAL_UI_PORT (8233), TEMPORAL_DB (.cache/temporal/dev.db),
# TEMPORAL_START_TIMEOUT in seconds (120). The server is plain text unless
# TEMPORAL_SERVE_TLS_CERT and TEMPORAL_SERVE_TLS_KEY are set (serve --tls-cert, --tls-key),
# with TEMPORAL_SERVE_TLS_CLIENT_CA (--tls-client-ca: mutual TLS) or TEMPORAL_SERVE_TLS_CA
# (--tls-ca); its checks then use the server's own certificate unless TEMPORAL_TLS_CA,
# TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY (wmrl's, which the checks always honour) say otherwise.
#
# The binary ($WMRL_TOOLS_DIR, default ~/.cache/wmrl/bin) is rebuilt only when deploy/devserver's go.mod, go.sum or *.go files, the Go
# version or the build flags change: their hash sits in .cache/bin/temporal-dev.stamp.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/deploy/devserver
# The binary lives outside the checkout so that every clone on this machine (CI's
# included) reuses it; WMRL_TOOLS_DIR moves it.
bin=${WMRL_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/wmrl/bin}/temporal-dev
stamp=$bin.stamp
state=$root/.cache/temporal
pidfile=$state/temporal-dev.pid
logfile=$state/temporal-dev.log

address=${TEMPORAL_ADDRESS:-127.0.0.1:7233}
namespace=${TEMPORAL_NAMESPACE:-default}
ui_port=${TEMPORAL_UI_PORT:-8233}
db=${TEMPORAL_DB:-$state/dev.db}
start_timeout=${TEMPORAL_START_TIMEOUT:-120}
# TLS of a server this script starts: serve's flags, and the checks' (empty: the checks
# take TEMPORAL_TLS_* themselves).
serve_tls=()
check_tls=()
if [[ -n ${TEMPORAL_SERVE_TLS_CERT:-} ]]; then
	serve_tls=(--tls-cert "$TEMPORAL_SERVE_TLS_CERT" --tls-key "${TEMPORAL_SERVE_TLS_KEY:-}")
	[[ -n ${TEMPORAL_SERVE_TLS_CLIENT_CA:-} ]] && serve_tls+=(--tls-client-ca "$TEMPORAL_SERVE_TLS_CLIENT_CA")
	[[ -n ${TEMPORAL_SERVE_TLS_CA:-} ]] && serve_tls+=(--tls-ca "$TEMPORAL_SERVE_TLS_CA")
	check_tls=(--tls-ca "${TEMPORAL_TLS_CA:-${TEMPORAL_SERVE_TLS_CA:-${TEMPORAL_SERVE_TLS_CLIENT_CA:-}}}"
		--tls-cert "${TEMPORAL_TLS_CERT:-$TEMPORAL_SERVE_TLS_CERT}" --tls-key "${TEMPORAL_TLS_KEY:-${TEMPORAL_SERVE_TLS_KEY:-}}")
fi
# Build flags without -trimpath, so `go vet` and `go test` in deploy/devserver reuse the
# compiled dependencies from the build cache.
# CGO_ENABLED=0: a static binary, so the same file runs here and in the FROM-scratch
# image deploy/images.sh builds (the server needs no cgo: its SQLite is pure Go).
build_flags=(-ldflags "-s -w")
export CGO_ENABLED=0
host=${address%:*}
port=${address##*:}

log() { echo "temporal.sh: $*"; }
die() {
	echo "temporal.sh: $*" >&2
	exit 1
}

source_hash() {
	(
		cd "$src"
		go version
		echo "${build_flags[*]} CGO_ENABLED=$CGO_ENABLED"
		sha256sum go.mod go.sum ./*.go
	) | sha256sum | cut -d' ' -f1
}

# answers HOST PORT: true if something accepts TCP connections there.
answers() {
	timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# our_pid: the pid of the server this script started, if it still runs.
our_pid() {
	[[ -f $pidfile ]] || return 1
	local pid
	pid=$(<"$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	[[ $(ps -o args= -p "$pid" 2>/dev/null) == *temporal-dev\ serve* ]] || return 1
	echo "$pid"
}

cmd_build() {
	local want
	want=$(source_hash)
	if [[ -x $bin && -f $stamp && $(<"$stamp") == "$want" ]]; then
		log "up to date: $bin"
		return
	fi
	mkdir -p "$(dirname "$bin")"
	log "building $bin (a cold build takes about 11 minutes on 2 cores)"
	local t0=$SECONDS
	(cd "$src" && nice -n 19 go build "${build_flags[@]}" -o "$bin.tmp" .)
	mv "$bin.tmp" "$bin"
	echo "$want" >"$stamp"
	log "built $bin in $((SECONDS - t0))s"
}

print_where() {
	log "Temporal frontend: $address (namespace $namespace)"
	log "Temporal Web UI:   http://$host:$ui_port/namespaces/$namespace/workflows"
}

# temporal_answers: true if a Temporal frontend serves $namespace at $address (gRPC).
temporal_answers() {
	"$bin" check --address "$address" --namespace "$namespace" --timeout "${1:-5}s" "${check_tls[@]}" >/dev/null 2>&1
}

cmd_start() {
	local pid
	if pid=$(our_pid) && temporal_answers; then
		log "already running (pid $pid)"
		print_where
		return
	fi
	case $host in
	127.0.0.1 | localhost)
		if answers "$host" "$port"; then
			cmd_build
			temporal_answers 10 || die "$address is taken but does not answer as Temporal with namespace $namespace"
			log "Temporal already answers at $address (not started by this script; its UI is not managed here)"
			return
		fi
		;;
	*)
		# A TCP connect proves little across proxies: ask the frontend itself.
		cmd_build
		temporal_answers 10 || die "TEMPORAL_ADDRESS=$address does not answer as Temporal with namespace $namespace: start that cluster or unset TEMPORAL_ADDRESS"
		log "using the Temporal cluster at $address (namespace $namespace)"
		return
		;;
	esac
	cmd_build
	mkdir -p "$state" "$(dirname "$db")"
	[[ -f $logfile ]] && mv "$logfile" "$logfile.prev"
	: >"$logfile"
	local t0=$SECONDS
	nohup "$bin" serve --ip 127.0.0.1 --port "$port" --ui-port "$ui_port" \
		--namespace "$namespace" --db "$db" --start-timeout "${start_timeout}s" "${serve_tls[@]}" \
		>"$logfile" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pidfile"
	# The server prints its ready line once the namespace, the search attributes and the
	# UI answer; a dead process or the timeout ends the wait.
	until grep -q '^temporal-dev: ready' "$logfile"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$pidfile"
			tail -n 20 "$logfile" >&2
			die "server exited during startup (log: $logfile)"
		fi
		if ((SECONDS - t0 > start_timeout)); then
			tail -n 20 "$logfile" >&2
			die "server not ready after ${start_timeout}s (pid $pid, log: $logfile)"
		fi
		sleep 0.2
	done
	# An independent gRPC check from a second process.
	"$bin" check --address "$address" --namespace "$namespace" --timeout 10s "${check_tls[@]}" >/dev/null
	log "started pid $pid in $((SECONDS - t0))s (log: $logfile, db: $db)"
	print_where
}

cmd_stop() {
	local pid
	if ! pid=$(our_pid); then
		rm -f "$pidfile"
		log "not running"
		return
	fi
	kill -TERM "$pid"
	local i
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop in 30s, killing it"
		kill -KILL "$pid"
	fi
	rm -f "$pidfile"
	log "stopped pid $pid"
}

cmd_status() {
	local pid
	if pid=$(our_pid); then
		log "running (pid $pid)"
		print_where
	elif answers "$host" "$port"; then
		log "not started by this script, but $address answers"
	else
		log "not running"
		return 3
	fi
}

case ${1:-} in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
