#!/usr/bin/env bash
# Prepares the real-data Python tasks (deploy/pytasks/prepare.py) with
# Debian's Python and Debian's packages of scikit-learn, statsmodels and
# pandas, installing those packages if missing (apt-get update first). The
# data are the datasets these packages ship; nothing else is downloaded.
#
# Usage: deploy/pytasks.sh install
#   only installs the packages (CI does, for the tests of prepare.py)
# Usage: deploy/pytasks.sh prepare OUT [SEED]
#   writes one task directory per task under OUT (created; must be empty or
#   absent), deterministically from SEED (default 20260101): the same seed
#   gives byte-identical files. Their leaderboards: wmrl tasks panel OUT/*
#   (the Python sandbox image, deploy/pyimage.sh); then import them with:
#   wmrl tasks import OUT/*
set -euo pipefail

log() { echo "pytasks.sh: $*" >&2; }

PY=/usr/bin/python3
PACKAGES=(python3 python3-sklearn python3-statsmodels python3-pandas python3-numpy)

usage() { echo "usage: deploy/pytasks.sh install | prepare OUT [SEED]" >&2; exit 2; }
case "${1:-}" in
install) [ $# -eq 1 ] || usage ;;
prepare) [ $# -ge 2 ] && [ $# -le 3 ] || usage ;;
*) usage ;;
esac

SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	SUDO=(sudo)
fi
apt_get() { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

have() { [ -x "$PY" ] && "$PY" -I -c 'import sklearn, statsmodels.api, pandas, numpy' >/dev/null 2>&1; }
if ! have; then
	if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
		log "$PY lacks sklearn/statsmodels/pandas and installing them needs root (no sudo here): apt-get install ${PACKAGES[*]}"
		exit 1
	fi
	log "installing ${PACKAGES[*]}"
	apt_get update >&2
	apt_get install -y --no-install-recommends "${PACKAGES[@]}" >&2
fi

[ "$1" = install ] && exit 0
here=$(cd "$(dirname "$0")" && pwd)
exec "$PY" -I -B "$here/pytasks/prepare.py" --seed "${3:-20260101}" --out "$2"
