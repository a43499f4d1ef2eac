#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the PostgreSQL image wmrl-postgres:<hash> of the compose deployment
# (deploy/compose) and prints its tag on stdout. Like the Python sandbox image
# (deploy/pyimage.sh) it is never pulled: a Debian root filesystem made here
# with debootstrap (--variant=minbase) from the machine's configured mirror,
# holding Debian's postgresql package, imported with `docker import`.
#
# The tag hashes this script, deploy/lib/debian.sh, the entrypoint, the
# package list, the mirror and suite and the version of every package in the
# dependency closure; when the tag exists the script only prints it
# (build_image of deploy/lib/debian.sh builds; finish_root below is what is
# this image's own).
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

# shellcheck disable=SC2034 # LOG_PREFIX is debian.sh's
LOG_PREFIX=pgimage.sh
# shellcheck source=lib/debian.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian.sh"

# shellcheck disable=SC2016 # expanded by the image's bash, not this one
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

# finish_root ROOT makes the debootstrapped ROOT start without a cluster,
# with the entrypoint, and prints the image's docker import instructions
# (build_image's hook).
finish_root() {
	local root=$1 pguid pggid
	# Debian's package created a cluster in /var/lib/postgresql/15/main at
	# install: the image starts without one (the entrypoint makes it in the
	# volume).
	as_root rm -rf "$root/var/lib/postgresql/15" "$root/etc/postgresql/15"
	printf '%s' "$ENTRYPOINT" | as_root tee "$root/usr/local/bin/wmrl-postgres" >/dev/null
	as_root chmod 755 "$root/usr/local/bin/wmrl-postgres"
	# The data directory and the socket directory belong to postgres, so a
	# new named volume mounted at /var/lib/postgresql/data inherits the owner.
	pguid=$(as_root chroot "$root" id -u postgres)
	pggid=$(as_root chroot "$root" id -g postgres)
	as_root mkdir -p "$root/var/lib/postgresql/data" "$root/var/run/postgresql"
	as_root chown "$pguid:$pggid" "$root/var/lib/postgresql/data" "$root/var/run/postgresql"
	as_root chmod 700 "$root/var/lib/postgresql/data"

	echo "USER $pguid:$pggid"
	echo 'ENV PGDATA=/var/lib/postgresql/data LANG=C.UTF-8'
	echo 'EXPOSE 5432'
	echo 'ENTRYPOINT ["/usr/local/bin/wmrl-postgres"]'
}

build_image wmrl-postgres finish_root postgresql-15
