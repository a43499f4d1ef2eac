#!/usr/bin/env bash
# Debian's Prometheus server: for the test that has a real Prometheus scrape
# a worker (worker TestMetricsScrapedByPrometheus; .ci/run installs it) and
# for watching workers by hand (README: Metrics).
#
# Usage: deploy/prometheus.sh install
#   installs Debian's prometheus package (apt-get update first) unless
#   /usr/bin/prometheus exists; silent when it does.
# Usage: deploy/prometheus.sh config HOST:PORT...
#   prints a prometheus.yml that scrapes each worker's /metrics (the
#   workers' --metrics-addr) every 15 s, as job wmrl.
set -euo pipefail

log() { echo "prometheus.sh: $*" >&2; }
usage() { echo "usage: deploy/prometheus.sh install | config HOST:PORT..." >&2; exit 2; }

BIN=/usr/bin/prometheus

case "${1:-}" in
install)
	[ $# -eq 1 ] || usage
	[ -x "$BIN" ] && exit 0
	SUDO=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || { log "installing prometheus needs root (no sudo here): apt-get install prometheus"; exit 1; }
		SUDO=(sudo)
	fi
	apt_get() { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=600 "$@"; }
	log "installing Debian's prometheus"
	apt_get update >/dev/null
	apt_get install -y --no-install-recommends prometheus >/dev/null
	[ -x "$BIN" ] || { log "apt-get installed prometheus but $BIN is missing"; exit 1; }
	;;
config)
	[ $# -ge 2 ] || usage
	shift
	targets=$(printf '"%s", ' "$@")
	cat <<YAML
global:
  scrape_interval: 15s
scrape_configs:
  - job_name: wmrl
    metrics_path: /metrics
    static_configs:
      - targets: [${targets%, }]
YAML
	;;
*) usage ;;
esac
