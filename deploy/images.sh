#!/usr/bin/env bash
# Builds every image of the compose deployment (deploy/compose) and prints
# their tags as an env file:
#
#   WMRL_IMAGE=wmrl:<hash>                    wmrl, wmrl-worker, wmrl-executor
#   WMRL_TEMPORAL_IMAGE=wmrl-temporal:<hash>  the Temporal server with its Web UI
#   WMRL_POSTGRES_IMAGE=wmrl-postgres:<hash>  PostgreSQL from Debian's packages
#
# Nothing is pulled. The first two are FROM scratch with the project's own
# static binaries (CGO_ENABLED=0), tagged by the hash of those binaries: a
# rebuild of unchanged code is a no-op for Docker. The Temporal binary is
# deploy/temporal.sh's (built once, cached in ~/.cache/wmrl/bin); the
# Postgres image is deploy/pgimage.sh's (debootstrap, cached by its inputs).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "images.sh: $*" >&2; }
cache=${WMRL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wmrl}
work=$(mktemp -d "${TMPDIR:-/tmp}/wmrl-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

# image NAME CONTEXT: builds CONTEXT's Dockerfile as NAME:<hash of the context>
# unless that tag exists, and prints the tag.
image() {
	local name=$1 ctx=$2 hash
	hash=$(cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
	if ! docker image inspect "$name:$hash" >/dev/null 2>&1; then
		log "building $name:$hash"
		docker build -q -t "$name:$hash" "$ctx" >&2
	fi
	echo "$name:$hash"
}

# wmrl: the command, the worker and the executor, static, with empty /data and
# /tmp owned by the image's user (a new named volume takes that owner).
version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
mkdir -p "$work/wmrl/bin" "$work/wmrl/data" "$work/wmrl/tmp"
log "go build (static) wmrl, wmrl-worker, wmrl-executor"
(
	cd "$root"
	export CGO_ENABLED=0
	go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$work/wmrl/bin/wmrl" ./starter
	go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$work/wmrl/bin/wmrl-worker" ./worker
	go build -trimpath -ldflags "-s -w" -o "$work/wmrl/bin/wmrl-executor" ./internal/executor/wmrl-executor
)
touch "$work/wmrl/data/.keep" "$work/wmrl/tmp/.keep"
cat >"$work/wmrl/Dockerfile" <<'DOCKER'
FROM scratch
COPY bin/ /usr/local/bin/
COPY --chown=65534:65534 data/ /data/
COPY --chown=65534:65534 tmp/ /tmp/
# USER and HOME: without cgo, os/user reads only the environment.
ENV PATH=/usr/local/bin WMRL_DATA_DIR=/data TMPDIR=/tmp USER=nobody HOME=/tmp
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/wmrl-worker"]
DOCKER
wmrl_image=$(image wmrl "$work/wmrl")

# wmrl-temporal: deploy/temporal.sh's static dev-server binary.
bash "$root/deploy/temporal.sh" build >&2
bin=${WMRL_TOOLS_DIR:-$cache/bin}/temporal-dev
mkdir -p "$work/temporal/tmp"
cp "$bin" "$work/temporal/temporal-dev"
touch "$work/temporal/tmp/.keep"
cat >"$work/temporal/Dockerfile" <<'DOCKER'
FROM scratch
COPY temporal-dev /usr/local/bin/temporal-dev
COPY --chown=65534:65534 tmp/ /tmp/
# USER and HOME: the server's OpenTelemetry resource asks os/user, which
# without cgo reads only the environment.
ENV USER=nobody HOME=/tmp TMPDIR=/tmp
USER 65534:65534
EXPOSE 7233 8233
ENTRYPOINT ["/usr/local/bin/temporal-dev"]
DOCKER
temporal_image=$(image wmrl-temporal "$work/temporal")

postgres_image=$(bash "$root/deploy/pgimage.sh")

echo "WMRL_IMAGE=$wmrl_image"
echo "WMRL_TEMPORAL_IMAGE=$temporal_image"
echo "WMRL_POSTGRES_IMAGE=$postgres_image"
