#!/usr/bin/env bash
# make bench: Go benchmarks of wmrl's hot paths, then isotonic.Fit side by
# side with scikit-learn's IsotonicRegression(out_of_bounds="clip").fit on the
# same data (internal/bench/isobench), failing if predictions differ by > 1e-9,
# then the cost of one execution against one world-model prediction.
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
trap 'rm -rf "$exe_dir"' EXIT
if CGO_ENABLED=0 go build -o "$exe_dir/wmrl-executor" ./internal/executor/wmrl-executor; then
	go run ./internal/bench/execbench -sandbox process -executor "$exe_dir/wmrl-executor" || status=$?
else
	status=1
fi
exit "$status"
