#!/usr/bin/env bash
# Builds the PostgreSQL image wmrl-postgres:<hash> of the compose deployment
# (deploy/compose) and prints its tag on stdout. Like the Python sandbox image
# (deploy/pyimage.sh) it is never pulled: a Debian root filesystem made here
# with debootstrap (--variant=minbase) from the machine's configured mirror,
# holding Debian's postgresql package, imported with `docker import`.
#
# The tag hashes this script, deploy/lib/debian.sh, the entrypoint, the
# package list, the mirror and suite and the version of every package in the
# dependency closure; when the tag exists the script only prints it.
#
# The image runs as the postgres user. Its entrypoint (/usr/local/bin/
# wmrl-postgres, written below) creates the cluster in $PGDATA on first start
# with the superuser password read from $POSTGRES_PASSWORD_FILE (never an
# environment variable or a layer of the image), requires a password
# (scram-sha-256) for every TCP connection, creates the databases named in
# $POSTGRES_DATABASES, and runs postgres in the foreground.
#
# Usage: deploy/pgimage.sh          (prints wmrl-postgres:<hash>)
set -euo pipefail

LOG_PREFIX=pgimage.sh
# shellcheck source=lib/debian.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian.sh"

PACKAGES=(postgresql-15)
REPO=wmrl-postgres
set_mirror

ENTRYPOINT='#!/bin/bash
# wmrl-postgres: first start creates the cluster, every start runs postgres.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
: "${PGDATA:=/var/lib/postgresql/data}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pw=${POSTGRES_PASSWORD_FILE:-}
	if [ -z "$pw" ] || [ ! -s "$pw" ]; then
		echo "wmrl-postgres: POSTGRES_PASSWORD_FILE must name a non-empty file for a new cluster" >&2
		exit 1
	fi
	"$bin/initdb" -D "$PGDATA" -U postgres -E UTF8 --locale=C --auth-local=peer \
		--auth-host=scram-sha-256 --pwfile="$pw" >/dev/null
	echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
	for db in ${POSTGRES_DATABASES:-}; do
		echo "CREATE DATABASE \"$db\"" | "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
	done
	echo "wmrl-postgres: created the cluster in $PGDATA (databases: ${POSTGRES_DATABASES:-none})" >&2
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses="*" -c max_connections=200 \
	-c unix_socket_directories=/var/run/postgresql
'

hash_of() {
	{
		cat "$0" "$(dirname "$0")/lib/debian.sh"
		printf 'packages %s\n' "${PACKAGES[*]}"
		printf 'mirror %s %s\n' "$MIRROR" "$SUITE"
		printf '%s\n' "$1"
	} | sha256sum | cut -c1-16
}

versions=$(resolved || true)
hash=$(hash_of "$versions")
tag="$REPO:$hash"
if grep -q '^postgresql-15 ' <<<"$versions" && docker image inspect "$tag" >/dev/null 2>&1; then
	echo "$tag"
	exit 0
fi

log "apt-get update (the tag's versions must be the mirror's)"
apt_get update >&2
versions=$(resolved)
if ! grep -q '^postgresql-15 ' <<<"$versions"; then
	log "postgresql-15 has no version in $SUITE/main of $MIRROR"
	exit 1
fi
hash=$(hash_of "$versions")
tag="$REPO:$hash"
if docker image inspect "$tag" >/dev/null 2>&1; then
	echo "$tag"
	exit 0
fi
ensure_debootstrap

cache=${WMRL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wmrl}
work="$cache/pgimage/$hash"
mkdir -p "$cache/pgimage"
exec 9>"$work.lock"
if ! flock -n 9; then
	log "another pgimage.sh is building $tag; waiting for it"
	flock 9
fi
if docker image inspect "$tag" >/dev/null 2>&1; then
	echo "$tag"
	exit 0
fi
cleanup() { unmount_and_remove "$work"; }
cleanup
mkdir -p "$work"
trap cleanup EXIT
root="$work/root"

start=$(date +%s)
log "debootstrap $SUITE from $MIRROR into $root"
as_root debootstrap --variant=minbase --include="$(
	IFS=,
	echo "${PACKAGES[*]}"
)" "$SUITE" "$root" "$MIRROR" >&2

mismatch=$(as_root chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' |
	awk 'NR == FNR { want[$1] = $2; next } ($1 in want) && want[$1] != $2 { print $1, "hashed", want[$1], "installed", $2 }' \
		<(printf '%s\n' "$versions") -)
if [ -n "$mismatch" ]; then
	log "debootstrap installed other versions than the apt lists give: $(tr '\n' ';' <<<"$mismatch")"
	exit 1
fi
as_root chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' | as_root tee "$root/etc/wmrl-packages" >/dev/null

# Debian's package created a cluster in /var/lib/postgresql/15/main at install:
# the image starts without one (the entrypoint makes it in the volume).
as_root rm -rf "$root/var/lib/postgresql/15" "$root/etc/postgresql/15"
printf '%s' "$ENTRYPOINT" | as_root tee "$root/usr/local/bin/wmrl-postgres" >/dev/null
as_root chmod 755 "$root/usr/local/bin/wmrl-postgres"
# The data directory and the socket directory belong to postgres, so a new
# named volume mounted at /var/lib/postgresql/data inherits the owner.
pguid=$(as_root chroot "$root" id -u postgres)
pggid=$(as_root chroot "$root" id -g postgres)
as_root mkdir -p "$root/var/lib/postgresql/data" "$root/var/run/postgresql"
as_root chown "$pguid:$pggid" "$root/var/lib/postgresql/data" "$root/var/run/postgresql"
as_root chmod 700 "$root/var/lib/postgresql/data"
as_root rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* \
	"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
	"$root"/usr/share/locale/* "$root"/var/log/* "$root"/tmp/* "$root"/var/tmp/*

as_root tar -C "$root" --numeric-owner -c . | docker import \
	--change "USER $pguid:$pggid" \
	--change 'ENV PGDATA=/var/lib/postgresql/data LANG=C.UTF-8' \
	--change 'EXPOSE 5432' \
	--change 'ENTRYPOINT ["/usr/local/bin/wmrl-postgres"]' \
	--change "LABEL org.wmrl.inputs=$hash" \
	- "$tag" >&2
log "built $tag in $(($(date +%s) - start)) s"
echo "$tag"
