# Shared by deploy/pyimage.sh and deploy/pgimage.sh, which build Docker images
# from Debian root filesystems made here with debootstrap (never pulled).
# Sourced, not run; the callers hash this file into their image tags.

log() { echo "${LOG_PREFIX:-debian.sh}: $*" >&2; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=(sudo)
	else
		log "debootstrap and apt-get need root (no sudo here)"
		exit 1
	fi
fi
as_root() { "${SUDO[@]}" "$@"; }
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# mirror_and_suite prints "URI SUITE" of the first Debian (non-security)
# source configured in /etc/apt/sources.list.d/*.sources (deb822) or
# /etc/apt/sources.list (one-line format).
mirror_and_suite() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# deb822: stanzas separated by blank lines; take Types: deb stanzas.
		awk '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && uri != "" && uri !~ /security/ && suite != "") { print uri, suite; found = 1; exit }
				types = ""; uri = ""; suite = ""
			}
			/^[[:space:]]*#/ { next }
			/^[[:space:]]*$/ { flush(); next }
			tolower($1) == "types:" { $1 = ""; types = $0 }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { suite = $2 }
			END { if (!found) flush() }
		' "$f" | head -n1 | grep . && return 0
	done
	if [ -f /etc/apt/sources.list ]; then
		awk '$1 == "deb" {
			i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
			if ($i !~ /security/) { print $i, $(i+1); exit }
		}' /etc/apt/sources.list | head -n1 | grep . && return 0
	fi
	return 1
}

# set_mirror sets MIRROR and SUITE from the machine's apt sources.
set_mirror() {
	if ! read -r MIRROR SUITE < <(mirror_and_suite); then
		log "no Debian source found in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources"
		exit 1
	fi
	MIRROR=${MIRROR%/} # as apt prints it, without a trailing slash
}

# resolved prints "package version" for every package in the dependency
# closure of PACKAGES (Depends and Pre-Depends, every alternative), each at
# the version the machine's apt lists give for $SUITE/main of $MIRROR: what
# debootstrap installs from that suite.
resolved() {
	local closure
	closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances "${PACKAGES[@]}" 2>/dev/null |
		grep -E '^[a-z0-9]' | sort -u)
	# shellcheck disable=SC2086
	LC_ALL=C apt-cache madison $closure 2>/dev/null | awk -F' [|] ' -v m="$MIRROR" -v s="$SUITE/main" '
		{ gsub(/^ +| +$/, "", $1); gsub(/ +/, "", $2); n = split($3, src, " ") }
		{ sub(/\/$/, "", src[1]) }
		n >= 2 && src[1] == m && src[2] == s { print $1, $2 }
	' | sort -u
}

# ensure_debootstrap installs debootstrap if it is missing.
ensure_debootstrap() {
	command -v debootstrap >/dev/null 2>&1 && return
	log "installing debootstrap"
	if ! apt_get install -y debootstrap >&2; then
		apt_get update >&2
		apt_get install -y debootstrap >&2
	fi
}

# unmount_and_remove DIR unmounts whatever an interrupted debootstrap left
# mounted under DIR (proc, sys) and removes it, never crossing into another
# file system.
unmount_and_remove() {
	local m
	for m in $(awk -v w="$1/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r); do
		as_root umount -l "$m" || true
	done
	as_root rm -rf --one-file-system "$1"
}
