#!/usr/bin/env bash
# Creates the Secret wmrl-db of the Kubernetes deployment (README.md), which
# is never committed: a random database password, under two keys,
#
#   postgres-password  the PostgreSQL superuser's (postgres, temporal)
#   database-url       wmrl's DSN with it (migrate, the workers)
#
# in the namespace $WMRL_K8S_NAMESPACE (default wmrl, kustomization.yaml's).
# It leaves an existing Secret alone: the password is the cluster's from its
# first start on, so a new one would lock everything out.
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

if [[ -z $dry ]] && kubectl -n "$ns" get secret "$name" >/dev/null 2>&1; then
	echo "secret.sh: secret $ns/$name exists; left as it is" >&2
	exit 0
fi

pw=$(head -c 32 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-32)
envfile() {
	printf 'postgres-password=%s\n' "$pw"
	printf 'database-url=postgres://postgres:%s@postgres:5432/wmrl?sslmode=disable\n' "$pw"
}
if [[ -n $dry ]]; then
	kubectl -n "$ns" create secret generic "$name" --from-env-file=/dev/stdin --dry-run=client -o yaml < <(envfile)
	exit 0
fi
kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns"
kubectl -n "$ns" create secret generic "$name" --from-env-file=/dev/stdin < <(envfile)
