#!/usr/bin/env bash
# run.sh runs the whole of Portico on a local cluster with one real node
# (hack/node.sh: kubelet, containerd, kube-proxy; needs root), offline.
#
#   hack/run.sh                start (or reuse) the node and its registry,
#                              publish a release of the tree there
#                              (hack/release, host platform only), install
#                              Istio's CRDs and that release's chart
#                              (oci://) into portico-system (restricted Pod
#                              Security Standard enforced), create the
#                              APIGateway; the operator and the controllers
#                              run as pods pulled from the registry. Then:
#                                kubectl apply -f config/samples/
#   hack/run.sh install-istio  apply the real Istio CRDs (from the istio.io/api
#                              Go module) to the cluster
#   hack/run.sh remove-istio   delete them again: the operator removes the
#                              controllers that need them (Blocked)
#
# `make run-down` (hack/node.sh down) removes the node and the cluster.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
namespace=portico-system
release=portico
version=v0.0.0-dev
istio_api_version=v1.31.1 # used only when go.mod does not require istio.io/api

log() { echo "run: $*" >&2; }

bin=$("$here/testbin.sh" --node)
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

istio_crds() {
	local dir
	dir=$(cd "$root" && go list -m -f '{{.Dir}}' istio.io/api 2>/dev/null || true)
	if [[ -z "$dir" ]]; then
		dir=$(cd "$root" && go mod download -json "istio.io/api@$istio_api_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	fi
	echo "$dir/kubernetes/customresourcedefinitions.gen.yaml"
}

install_istio() {
	kubectl apply --server-side --field-manager=istio-install -f "$(istio_crds)" >/dev/null
	kubectl wait --for=condition=Established --timeout=60s -f "$(istio_crds)" >/dev/null
}

case "${1:-run}" in
install-istio | remove-istio)
	kubeconfig=$("$here/cluster.sh" kubeconfig portico-node)
	if [[ $1 == install-istio ]]; then
		install_istio
		log "Istio CRDs applied; the operator rolls the controllers out"
	else
		kubectl delete --ignore-not-found --wait=false -f "$(istio_crds)" >/dev/null
		log "Istio CRDs deleted; the operator removes the controllers"
	fi
	exit 0
	;;
run) ;;
*)
	sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac

kubeconfig=$("$here/node.sh" up | tail -n 1)

registry=$("$here/node.sh" registry)/portico
log "publishing the tree as release $version to the node's registry $registry"
(cd "$root" && go run ./hack/release --version "$version" --registry "$registry" \
	--platforms "linux/$(go env GOARCH)" --output "$root/bin/run-release") >/dev/null

log "installing Istio's CRDs"
install_istio

log "installing the chart into $namespace (restricted Pod Security Standard enforced)"
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $namespace
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
EOF
# The chart pins every image by digest: a rebuilt tree rolls out by itself.
"$bin/helm" upgrade --install "$release" "oci://$registry/charts/portico" --version "$version" --plain-http \
	--kubeconfig "$kubeconfig" --namespace "$namespace" --wait --timeout 3m >/dev/null

log "creating the APIGateway"
kubectl apply -f "$root/config/samples/operator_v1alpha1_apigateway.yaml" >/dev/null
kubectl wait --for=jsonpath='{.status.state}'=Ready apigateway/default --timeout 3m >/dev/null ||
	log "the APIGateway is not Ready yet: kubectl get apigw default -o yaml"

cat >&2 <<MSG

  Portico runs on node portico-node: the operator and every controller are pods.

  export KUBECONFIG=$kubeconfig PATH=$bin:\$PATH
  kubectl get apigw                          # STATE Ready, READY 2/2
  kubectl get pods -n $namespace
  kubectl apply -f config/samples/           # shop/orders: Service, APIRule, RateLimit
  kubectl get apirule -n shop orders         # Ready
  kubectl get virtualservice -n shop orders -o yaml

  make run-istio-remove   # delete Istio's CRDs: controllers removed, Blocked
  make run-istio          # apply them again: controllers roll out
  make run-down           # remove the node and the cluster

MSG
echo "$kubeconfig"
