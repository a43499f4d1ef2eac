# shellcheck shell=bash
# Shared by deploy/pyimage.sh and deploy/pgimage.sh, which build Docker images
# from Debian root filesystems made here with debootstrap (never pulled):
# build_image does the build, the scripts give it their packages and a hook
# that finishes the root. Sourced, not run; the image tags hash this file.

# DEBIAN_SH is this file, hashed into the tags.
DEBIAN_SH=${BASH_SOURCE[0]}

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

# resolved PACKAGE... prints "package version" for every package in the
# dependency closure of the PACKAGEs (Depends and Pre-Depends, every
# alternative), each at the version the machine's apt lists give for
# $SUITE/main of $MIRROR: what debootstrap installs from that suite.
resolved() {
	local closure
	closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances "$@" 2>/dev/null |
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
	awk -v w="$1/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
		as_root umount -l "$m" || true
	done
	as_root rm -rf --one-file-system "$1"
}

# build_image REPO FINISH PACKAGE... prints the tag REPO:<hash> of a Debian
# root with the PACKAGEs (and their dependencies) on stdout, after building
# and importing it into Docker unless that tag exists.
#
# The hash is the first 16 hex digits of the SHA-256 of the inputs: the
# calling script ($0), this file, the package list, the mirror and suite,
# and the version of every package in the dependency closure in that suite,
# as the machine's apt lists give it. When that tag exists, build_image only
# prints it (a no-op; no network, a few seconds). Otherwise it runs apt-get
# update first (so that the versions hashed are the mirror's), takes a lock
# so that one build of a tag runs at a time (a second caller waits, then
# finds the tag), debootstraps (--variant=minbase) into a build directory
# under $WMRL_CACHE/<script name> (default ~/.cache/wmrl/...), checks that
# debootstrap installed exactly the versions hashed, and calls FINISH ROOT.
#
# FINISH is the name of a shell function that finishes the root filesystem
# ROOT as root (as_root): removes what the image leaves out, writes its own
# files, checks that the image can do what it is for. It prints the image's
# `docker import --change` instructions (USER, ENV, ENTRYPOINT, ...), one a
# line, on stdout, and logs on stderr. After it, build_image keeps the list
# of installed packages in the image as /etc/wmrl-packages, removes apt's
# caches and lists, docs, man pages, locales, logs and temporary files,
# imports the root with the instructions and the label org.wmrl.inputs=<hash>,
# and removes the build directory (also on failure).
build_image() {
	local repo=$1 finish=$2
	shift 2
	local packages=("$@") versions hash tag
	set_mirror

	# The no-op: the image of the current resolution exists. No network.
	versions=$(resolved "${packages[@]}" || true)
	tag="$repo:$(inputs_hash "$versions" "${packages[@]}")"
	if [ -z "$(unresolved "$versions" "${packages[@]}")" ] && docker image inspect "$tag" >/dev/null 2>&1; then
		echo "$tag"
		return 0
	fi

	# A build downloads anyway: first bring the apt lists up to date with the
	# mirror, so that the versions hashed are the versions debootstrap gets.
	log "apt-get update (the tag's versions must be the mirror's)"
	apt_get update >&2
	versions=$(resolved "${packages[@]}")
	local missing
	missing=$(unresolved "$versions" "${packages[@]}")
	if [ -n "$missing" ]; then
		log "no version in $SUITE/main of $MIRROR for: $(tr '\n' ' ' <<<"$missing")"
		exit 1
	fi
	hash=$(inputs_hash "$versions" "${packages[@]}")
	tag="$repo:$hash"
	if docker image inspect "$tag" >/dev/null 2>&1; then
		echo "$tag"
		return 0
	fi

	ensure_debootstrap

	local name cache work
	name=$(basename "$0" .sh)
	cache=${WMRL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wmrl}
	work="$cache/$name/$hash"
	# One build of a tag at a time: a second call waits for the first, then
	# finds the tag. The lock is held until the script exits.
	mkdir -p "$cache/$name"
	exec 9>"$work.lock"
	if ! flock -n 9; then
		log "another $name.sh is building $tag; waiting for it"
		flock 9
	fi
	if docker image inspect "$tag" >/dev/null 2>&1; then
		echo "$tag"
		return 0
	fi
	# What an interrupted build left (mounts included) goes first; this
	# build's directory goes when the script exits, however it exits.
	unmount_and_remove "$work"
	mkdir -p "$work"
	# shellcheck disable=SC2064 # $work is expanded now, on purpose
	trap "unmount_and_remove $(printf %q "$work")" EXIT
	local root="$work/root" start include mismatch change
	start=$(date +%s)

	log "debootstrap $SUITE from $MIRROR into $root"
	include=$(
		IFS=,
		echo "${packages[*]}"
	)
	as_root debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" >&2

	# Every package installed from the closure has the version hashed.
	# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
	mismatch=$(as_root chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' |
		awk 'NR == FNR { want[$1] = $2; next } ($1 in want) && want[$1] != $2 { print $1, "hashed", want[$1], "installed", $2 }' \
			<(printf '%s\n' "$versions") -)
	if [ -n "$mismatch" ]; then
		log "debootstrap installed other versions than the apt lists give (the mirror changed meanwhile?): $(tr '\n' ';' <<<"$mismatch")"
		exit 1
	fi

	# The hook runs in this shell (not in a $(...), where set -e would not
	# stop it at a failed check); its instructions go through a file.
	"$finish" "$root" >"$work/changes"

	# The package list, kept in the image; then smaller: no apt caches or
	# lists, no docs, man pages or locales, no logs or temporary files.
	# shellcheck disable=SC2016 # dpkg-query's format
	as_root chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' | as_root tee "$root/etc/wmrl-packages" >/dev/null
	as_root rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* \
		"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
		"$root"/usr/share/locale/* "$root"/var/log/* "$root"/tmp/* "$root"/var/tmp/*

	local changes=()
	while IFS= read -r change; do
		[ -n "$change" ] && changes+=(--change "$change")
	done <"$work/changes"
	as_root tar -C "$root" --numeric-owner -c . |
		docker import "${changes[@]}" --change "LABEL org.wmrl.inputs=$hash" - "$tag" >&2
	log "built $tag in $(($(date +%s) - start)) s"
	echo "$tag"
}

# inputs_hash VERSIONS PACKAGE... prints the tag's hash of the calling
# script, this file, the PACKAGEs, $MIRROR and $SUITE and the resolution
# VERSIONS (resolved's output).
inputs_hash() {
	local versions=$1
	shift
	{
		cat "$0" "$DEBIAN_SH"
		printf 'packages %s\n' "$*"
		printf 'mirror %s %s\n' "$MIRROR" "$SUITE"
		printf '%s\n' "$versions"
	} | sha256sum | cut -c1-16
}

# unresolved VERSIONS PACKAGE... prints, one a line, the PACKAGEs that have
# no version in VERSIONS (resolved's output).
unresolved() {
	local versions=$1 p
	shift
	for p; do
		grep -q "^$p " <<<"$versions" || echo "$p"
	done
}
