#!/usr/bin/env bash
# make bench: Go benchmarks of wmrl's hot paths, with baselines run side by side.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -run '^$' -bench . -benchmem ./internal/...
