#!/usr/bin/env bash
# Creates the Secret wmrl-db of the Kubernetes deployment (README.md), which
# is never committed: a random database password, under two keys,
#
#   postgres-password  the PostgreSQL superuser's (postgres, temporal)
#   database-url       wmrl's DSN with it (migrate, the workers)
#
# and the certificates of Temporal's mutual TLS, from a CA made here
# (deploy/gencerts, with Go; the CA's key is never written, the files live
# in a private temporary directory removed on exit):
#
#   temporal-tls-ca                                     the CA's certificate
#   temporal-tls-server-cert, temporal-tls-server-key   Temporal's
#   temporal-tls-client-cert, temporal-tls-client-key   the workers'
#
# in the namespace $WMRL_K8S_NAMESPACE (default wmrl, kustomization.yaml's).
# It leaves an existing Secret alone: the password is the cluster's from its
# first start on, so a new one would lock everything out (a Secret made
# before TLS gets the temporal-tls-* keys added).
#
#   deploy/k8s/secret.sh            create it unless it exists
#   deploy/k8s/secret.sh --dry-run  print the manifest it would create (with
#                                   a fresh password; for the test)
#
# The password goes to kubectl through a pipe, never on a command line.
set -euo pipefail

ns=${WMRL_K8S_NAMESPACE:-wmrl}
name=wmrl-db

dry=
case ${1:-} in
"") ;;
--dry-run) dry=1 ;;
*)
	echo "usage: deploy/k8s/secret.sh [--dry-run]" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tls=$(mktemp -d "${TMPDIR:-/tmp}/wmrl-tls.XXXXXX")
trap 'rm -rf "$tls"' EXIT
certs() {
	(cd "$root" && go run ./deploy/gencerts -dir "$tls/certs" \
		-names "temporal,temporal.$ns,temporal.$ns.svc,localhost,127.0.0.1") >/dev/null
}

if [[ -z $dry ]] && kubectl -n "$ns" get secret "$name" >/dev/null 2>&1; then
	if [[ -n $(kubectl -n "$ns" get secret "$name" -o jsonpath='{.data.temporal-tls-ca}') ]]; then
		echo "secret.sh: secret $ns/$name exists; left as it is" >&2
		exit 0
	fi
	# A Secret from before TLS: add the certificates, keep the password. The
	# patch goes to kubectl in a file of the private directory.
	certs
	b64() { base64 -w0 "$tls/certs/$1"; }
	printf '{"data":{"temporal-tls-ca":"%s","temporal-tls-server-cert":"%s","temporal-tls-server-key":"%s","temporal-tls-client-cert":"%s","temporal-tls-client-key":"%s"}}' \
		"$(b64 ca.pem)" "$(b64 server.pem)" "$(b64 server-key.pem)" "$(b64 client.pem)" "$(b64 client-key.pem)" >"$tls/patch.json"
	kubectl -n "$ns" patch secret "$name" --type merge --patch-file "$tls/patch.json" >/dev/null
	echo "secret.sh: secret $ns/$name exists; added the temporal-tls-* keys" >&2
	exit 0
fi

certs

pw=$(head -c 32 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-32)
create() {
	kubectl -n "$ns" create secret generic "$name" "$@" \
		--from-file=postgres-password=<(printf '%s' "$pw") \
		--from-file=database-url=<(printf 'postgres://postgres:%s@postgres:5432/wmrl?sslmode=disable' "$pw") \
		--from-file=temporal-tls-ca="$tls/certs/ca.pem" \
		--from-file=temporal-tls-server-cert="$tls/certs/server.pem" \
		--from-file=temporal-tls-server-key="$tls/certs/server-key.pem" \
		--from-file=temporal-tls-client-cert="$tls/certs/client.pem" \
		--from-file=temporal-tls-client-key="$tls/certs/client-key.pem"
}
if [[ -n $dry ]]; then
	create --dry-run=client -o yaml
	exit 0
fi
kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns"
create
