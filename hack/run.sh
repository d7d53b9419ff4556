#!/usr/bin/env bash
# run.sh runs Portico's operator on a local, offline kwok cluster.
#
#   hack/run.sh                start (or reuse) the cluster, install Portico's
#                              CRDs, the controllers' ServiceAccounts and the
#                              sample APIGateway, then run the operator in the
#                              foreground (Ctrl-C stops it)
#   hack/run.sh install-istio  apply the real Istio CRDs (from the istio.io/api
#                              Go module) to the cluster
#   hack/run.sh remove-istio   delete the Istio CRDs again
#
# The cluster stays up after Ctrl-C; `make run-down` removes it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
namespace=portico-system
istio_api_version=v1.31.1 # used only when go.mod does not require istio.io/api

log() { echo "run: $*" >&2; }

kubeconfig=$("$here/cluster.sh" up | tail -n 1)
bin=$("$here/testbin.sh")
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

istio_crds() {
	local dir
	dir=$(cd "$root" && go list -m -f '{{.Dir}}' istio.io/api 2>/dev/null || true)
	if [[ -z "$dir" ]]; then
		dir=$(cd "$root" && go mod download -json "istio.io/api@$istio_api_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	fi
	echo "$dir/kubernetes/customresourcedefinitions.gen.yaml"
}

case "${1:-run}" in
install-istio)
	kubectl apply --server-side --field-manager=istio-install -f "$(istio_crds)" >/dev/null
	log "Istio CRDs applied; the operator rolls the controllers out"
	exit 0
	;;
remove-istio)
	kubectl delete --ignore-not-found --wait=false -f "$(istio_crds)" >/dev/null
	log "Istio CRDs deleted; the operator removes the controllers"
	exit 0
	;;
run) ;;
*)
	sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac

log "installing Portico's CRDs, namespace, controller ServiceAccounts and the sample APIGateway"
kubectl apply --server-side --field-manager=portico-run -f "$root/config/crd/bases" >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f "$root/config/crd/bases" >/dev/null
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
for c in apirule ratelimit; do
	kubectl -n "$namespace" create serviceaccount "$c-controller" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
done
kubectl apply -f "$root/config/samples/operator_v1alpha1_apigateway.yaml" >/dev/null

log "building the operator"
(cd "$root" && make --no-print-directory build >/dev/null)

cat >&2 <<MSG

  Kubeconfig:  $kubeconfig
  Watch:       KUBECONFIG=$kubeconfig $bin/kubectl get apigw -w
  Istio CRDs:  make run-istio         (controllers go Blocked -> Progressing -> Ready)
               make run-istio-remove  (controllers are removed, Blocked again)
  Stop:        Ctrl-C here; make run-down removes the cluster

MSG
exec "$root/bin/portico-operator" --kubeconfig "$kubeconfig" --namespace "$namespace" \
	--controller-image-registry registry.local/portico --controller-image-tag dev \
	--metrics-bind-address 127.0.0.1:18080 --health-probe-bind-address 127.0.0.1:18081
