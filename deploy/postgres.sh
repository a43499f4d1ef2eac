#!/usr/bin/env bash
# Installs (if missing) and starts a local PostgreSQL for wmrl on Debian/Ubuntu,
# creates the database "wmrl", then prints its DSN on stdout. Idempotent:
# running it again on a machine where all that is done changes nothing and
# prints the same DSN.
#
# Access: the Debian cluster authenticates Unix-socket clients by "peer" (OS
# user name = database user). So that tests and `wmrl migrate` can connect as
# the database user "postgres" from the user running this script, a peer map
# named "wmrl" lets the OS users postgres, root and the invoking user log in as
# "postgres" over the socket only. No TCP access is opened and no password is
# set.
#
# Usage: deploy/postgres.sh            (prints the DSN)
#        export WMRL_DATABASE_URL="$(deploy/postgres.sh)"
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

dsn="host=/var/run/postgresql user=postgres dbname=wmrl"

# Fast path, needing no privileges: everything is already done.
if command -v psql >/dev/null 2>&1 && psql "$dsn" -XAtqc 'select 1' >/dev/null 2>&1; then
	echo "$dsn"
	exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=(sudo)
	else
		log "cannot connect to \"$dsn\" as $(id -un), and installing, starting or granting access needs root (no sudo here)"
		exit 1
	fi
fi
as_root() { "${SUDO[@]}" "$@"; }

# apt-get waits up to 10 minutes for another apt/dpkg process to release its lock.
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
	log "installing postgresql"
	if ! apt_get install -y postgresql >&2; then
		apt_get update >&2
		apt_get install -y postgresql >&2
	fi
fi

# The newest installed major version that has a "main" cluster; create one if none.
version=""
for v in $(ls /usr/lib/postgresql | sort -n); do
	[ -x "/usr/lib/postgresql/$v/bin/postgres" ] && version="$v"
done
if [ -z "$version" ]; then
	log "no postgres server binary found under /usr/lib/postgresql"
	exit 1
fi
if [ ! -d "/etc/postgresql/$version/main" ]; then
	log "creating cluster $version/main"
	as_root pg_createcluster "$version" main >&2
fi
conf="/etc/postgresql/$version/main"

# Peer map: OS users postgres, root and the invoking user may connect as "postgres".
changed=0
me="${SUDO_USER:-$(id -un)}"
for u in postgres root "$me"; do
	if ! as_root grep -Eq "^wmrl[[:space:]]+$u[[:space:]]+postgres[[:space:]]*$" "$conf/pg_ident.conf"; then
		echo "wmrl            $u                    postgres" | as_root tee -a "$conf/pg_ident.conf" >/dev/null
		changed=1
	fi
done
if ! as_root grep -Eq '^local[[:space:]]+all[[:space:]]+postgres[[:space:]]+peer[[:space:]]+map=wmrl' "$conf/pg_hba.conf"; then
	# Put the mapped rule first so it wins over the default "local all postgres peer".
	tmp="$(mktemp)"
	{
		echo "# added by wmrl deploy/postgres.sh: socket login as postgres for mapped OS users"
		echo "local   all             postgres                                peer map=wmrl"
		as_root cat "$conf/pg_hba.conf"
	} >"$tmp"
	as_root cp "$tmp" "$conf/pg_hba.conf"
	rm -f "$tmp"
	changed=1
fi

status="$(pg_lsclusters --no-header | awk -v v="$version" '$1==v && $2=="main" {print $4}')"
if [ "$status" != "online" ]; then
	# A machine restored from a snapshot taken while postgres ran keeps its
	# socket lock files; postgres refuses to start when it cannot remove them
	# (seen: "could not remove old lock file ... Permission denied"). Remove
	# those whose process is gone, and give the socket directory back to postgres.
	as_root install -d -o postgres -g postgres -m 2775 /var/run/postgresql
	for lock in /var/run/postgresql/.s.PGSQL.*.lock; do
		[ -e "$lock" ] || continue
		pid="$(as_root head -n1 "$lock" 2>/dev/null | tr -dc '0-9')"
		if [ -z "$pid" ] || [ "$(ps -o comm= -p "$pid" 2>/dev/null)" != "postgres" ]; then
			log "removing stale lock file $lock (pid ${pid:-none} is gone)"
			as_root rm -f "$lock" "${lock%.lock}"
		fi
	done
	log "starting cluster $version/main"
	as_root pg_ctlcluster "$version" main start >&2
elif [ "$changed" -eq 1 ]; then
	as_root pg_ctlcluster "$version" main reload >&2
fi

# The wmrl database (created once); its DSN is printed.
admin="host=/var/run/postgresql user=postgres dbname=postgres"
for i in $(seq 1 30); do
	if psql "$admin" -XAtqc 'select 1' >/dev/null 2>&1; then
		if [ -z "$(psql "$admin" -XAtqc "select 1 from pg_database where datname = 'wmrl'")" ]; then
			log "creating database wmrl"
			psql "$admin" -XAtqc 'create database wmrl' >&2
		fi
		echo "$dsn"
		exit 0
	fi
	sleep 1
done
log "postgres $version/main did not accept connections; see /var/log/postgresql/postgresql-$version-main.log"
exit 1
