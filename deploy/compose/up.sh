#!/usr/bin/env bash
# The compose deployment of wmrl (deploy/compose/docker-compose.yml).
#
#   deploy/compose/up.sh [up]   build the images, generate the secrets once, start
#                               everything and wait until every service is up
#   deploy/compose/up.sh demo   run the demo preset on it through the cli service
#   deploy/compose/up.sh down   stop and remove the containers (volumes kept)
#   deploy/compose/up.sh purge  down, and remove the volumes and the secrets
#   deploy/compose/up.sh ps     docker-compose ps
#   deploy/compose/up.sh -- ARGS  any docker-compose command, e.g. -- logs -f gpu
#
# The project name is wmrl-deploy ($WMRL_COMPOSE_PROJECT). With
# WMRL_COMPOSE_DATA_DIR set, every role's /data is that host directory
# (data-dir.yml) instead of the named volume "data". Secrets live in
# deploy/compose/.secrets (mode 0700, ignored by git), never in an image: the
# database password and, in .secrets/tls, the certificates of Temporal's
# mutual TLS (ca.pem, server and client pairs; remove the directory for a
# new CA). A client on the host reaches 127.0.0.1:$WMRL_COMPOSE_TEMPORAL_PORT
# with TEMPORAL_TLS_CA=.secrets/tls/ca.pem, TEMPORAL_TLS_CERT=.secrets/tls/client.pem
# and TEMPORAL_TLS_KEY=.secrets/tls/client-key.pem.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
project=${WMRL_COMPOSE_PROJECT:-wmrl-deploy}
log() { echo "compose: $*" >&2; }
# With WMRL_COMPOSE_DATA_DIR set, /data is that host directory (data-dir.yml).
dc() {
	local files=(-f "$here/docker-compose.yml")
	[[ -n ${WMRL_COMPOSE_DATA_DIR:-} ]] && files+=(-f "$here/data-dir.yml")
	docker-compose -p "$project" --project-directory "$here" "${files[@]}" "$@"
}

secrets() {
	local s=$here/.secrets
	tls_certs
	[[ -s $s/pg-password ]] && return
	log "generating the database password in $s"
	mkdir -p "$s"
	chmod 700 "$s"
	local pw
	pw=$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | cut -c1-24)
	(
		umask 077
		printf '%s' "$pw" >"$s/pg-password"
		printf 'TEMPORAL_POSTGRES_PASSWORD=%s\n' "$pw" >"$s/temporal.env"
		printf 'WMRL_DATABASE_URL=postgres://postgres:%s@postgres:5432/wmrl?sslmode=disable\n' "$pw" >"$s/wmrl.env"
	)
	# The postgres image reads the password file as its own user.
	chmod 644 "$s/pg-password"
}

# tls_certs makes the CA and the certificates of Temporal's mutual TLS
# (deploy/gencerts) unless they exist; the CA's key is never written. The
# containers read the files as uid 65534: the keys are 0644 inside
# .secrets (0700), as pg-password, so only its owner reaches them here.
tls_certs() {
	local s=$here/.secrets t=$here/.secrets/tls
	[[ -s $t/ca.pem && -s $t/server-key.pem && -s $t/client-key.pem ]] && return
	log "generating the CA and Temporal's TLS certificates in $t"
	mkdir -p "$s"
	chmod 700 "$s"
	rm -rf "$t"
	(cd "$root" && go run ./deploy/gencerts -dir "$t" -names temporal,localhost,127.0.0.1) >/dev/null
	chmod 755 "$t"
	chmod 644 "$t"/*.pem
}

images() {
	log "building the images (deploy/images.sh)"
	bash "$root/deploy/images.sh" >"$here/.env.tmp"
	{
		cat "$here/.env.tmp"
		echo "WMRL_COMPOSE_TEMPORAL_PORT=${WMRL_COMPOSE_TEMPORAL_PORT:-17233}"
		echo "WMRL_COMPOSE_UI_PORT=${WMRL_COMPOSE_UI_PORT:-18233}"
	} >"$here/.env"
	rm -f "$here/.env.tmp"
	sed 's/^/compose: /' "$here/.env" >&2
}

wait_up() {
	local t0=$SECONDS deadline=${WMRL_COMPOSE_TIMEOUT:-600}
	local services=(postgres temporal control sandbox-1 sandbox-2 gpu)
	while :; do
		local waiting=()
		for s in "${services[@]}"; do
			local id state health
			id=$(dc ps -q "$s" 2>/dev/null || true)
			[[ -n $id ]] || { waiting+=("$s(absent)"); continue; }
			state=$(docker inspect -f '{{.State.Status}}' "$id")
			health=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id")
			if [[ $state != running || (-n $health && $health != healthy) ]]; then
				waiting+=("$s($state${health:+/$health})")
			fi
		done
		((${#waiting[@]} == 0)) && break
		if ((SECONDS - t0 > deadline)); then
			log "not up after ${deadline}s: ${waiting[*]}"
			dc logs --tail=20 >&2
			exit 1
		fi
		sleep 2
	done
	log "up in $((SECONDS - t0)) s: Temporal at 127.0.0.1:${WMRL_COMPOSE_TEMPORAL_PORT:-17233} (mutual TLS: certificates in $here/.secrets/tls), Web UI at http://127.0.0.1:${WMRL_COMPOSE_UI_PORT:-18233}"
}

case ${1:-up} in
up)
	secrets
	images
	dc up -d --remove-orphans
	wait_up
	;;
demo)
	shift || true
	dc run --rm cli run --preset "${WMRL_COMPOSE_PRESET:-demo}" --name "compose-demo-$(date +%s)" "$@"
	;;
down) dc down ;;
purge)
	dc down -v
	rm -rf "$here/.secrets" "$here/.env"
	;;
ps) dc ps ;;
--)
	shift
	dc "$@"
	;;
*)
	echo "usage: deploy/compose/up.sh [up|demo|down|purge|ps|-- ARGS]" >&2
	exit 2
	;;
esac
