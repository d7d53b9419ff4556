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
#                              run as pods pulled from the registry. It also
#                              installs the Gateway API's standard CRDs and
#                              runs Traefik (hack/traefik.sh) as a daemon of
#                              the node for the GatewayClass traefik, on
#                              127.0.0.1:18080. Then:
#                                kubectl apply -f config/samples/
#                                kubectl apply -f config/samples/gateway-api/
#   hack/run.sh install-istio  apply the real Istio CRDs (from the istio.io/api
#                              Go module) to the cluster
#   hack/run.sh remove-istio   delete them again: the operator removes the
#                              controllers that need them (Blocked)
#
# `make run-down` (hack/node.sh down) removes the node and the cluster.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=run
. "$here/lib.sh"
root=$(cd "$here/.." && pwd)
namespace=portico-system
release=portico
version=v0.0.0-dev
istio_api_version=v1.31.1 # used only when go.mod does not require istio.io/api
domain=portico.test       # spec.gateway.domain of config/samples' APIGateway
# Traefik's entrypoint port: the listener port of config/samples/gateway-api's Gateway.
traefik_port=18080
node_state=${XDG_CACHE_HOME:-$HOME/.cache}/portico/node/portico-node

# deployment NAMESPACE NAME "LABEL: VALUE" SERVICEACCOUNT "[ARGS]" prints a
# Deployment of the e2e agent image ($agent) that meets the restricted Pod
# Security Standard.
deployment() {
	cat <<EOF
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: $2, namespace: $1}
spec:
  selector: {matchLabels: {$3}}
  template:
    metadata: {labels: {$3}}
    spec:
      serviceAccountName: $4
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: agent
        image: $agent
        args: $5
        ports: [{name: http, containerPort: 8080}, {name: https, containerPort: 8443}]
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, readOnlyRootFilesystem: true}
EOF
}

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

gateway_api_crds() {
	echo "$(cd "$root" && go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard"
}

install_gateway_api() {
	kubectl apply --server-side --field-manager=gateway-api-install -f "$(gateway_api_crds)" >/dev/null
	local f crds=()
	for f in $(grep -l '^kind: CustomResourceDefinition' "$(gateway_api_crds)"/*.yaml); do
		f=${f##*/gateway.networking.k8s.io_}
		crds+=("crd/${f%.yaml}.gateway.networking.k8s.io")
	done
	kubectl wait --for=condition=Established --timeout=60s "${crds[@]}" >/dev/null
}

# run_traefik runs Traefik as a daemon of the node (node.sh down stops it)
# for the GatewayClass traefik: a host process with the token of the
# ServiceAccount traefik/traefik, which may read what its Gateway API
# provider watches and write the statuses it reports, and one entrypoint,
# 127.0.0.1:$traefik_port.
run_traefik() {
	local binary server
	binary=$("$here/traefik.sh")
	kubectl apply --server-side --field-manager=portico-run -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: traefik}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: traefik, namespace: traefik}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: portico-run-traefik}
rules:
- {apiGroups: [""], resources: [namespaces, services, secrets, configmaps], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses, gateways, httproutes, grpcroutes, tlsroutes, referencegrants, backendtlspolicies]
  verbs: [list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses/status, gateways/status, httproutes/status, grpcroutes/status, tlsroutes/status, backendtlspolicies/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: portico-run-traefik}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: portico-run-traefik}
subjects: [{kind: ServiceAccount, name: traefik, namespace: traefik}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: traefik}
spec: {controllerName: traefik.io/gateway-controller}
EOF
	mkdir -p "$node_state/traefik"
	kubectl create token traefik -n traefik --duration 720h >"$node_state/traefik/token"
	kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
		base64 -d >"$node_state/traefik/ca.crt"
	server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
	if [[ -f "$node_state/traefik.pid" ]]; then
		kill "$(cat "$node_state/traefik.pid")" 2>/dev/null || true
		while kill -0 "$(cat "$node_state/traefik.pid")" 2>/dev/null; do sleep 0.1; done
	fi
	# KUBECONFIG and in-cluster variables would take precedence over the
	# endpoint and token.
	env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT setsid "$binary" \
		--global.checknewversion=false --global.sendanonymoususage=false --log.level=INFO --log.nocolor=true \
		--entrypoints.web.address="127.0.0.1:$traefik_port" \
		--providers.kubernetesgateway=true \
		--providers.kubernetesgateway.endpoint="$server" \
		--providers.kubernetesgateway.token="$node_state/traefik/token" \
		--providers.kubernetesgateway.certauthfilepath="$node_state/traefik/ca.crt" \
		--providers.kubernetesgateway.statusaddress.ip=127.0.0.1 \
		--providers.providersthrottleduration=0s \
		>"$node_state/traefik.log" 2>&1 </dev/null 7>&- 9>&- &
	echo $! >"$node_state/traefik.pid"
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
(cd "$root" && "$(release_tool release)" --version "$version" --registry "$registry" \
	--platforms "linux/$(go env GOARCH)" --output "$root/bin/run-release") >/dev/null

log "installing Istio's CRDs"
install_istio

# Traefik builds (once: hack/traefik.sh caches it) while the chart installs.
[[ -x "$("$here/traefik.sh" --path)" ]] || log "building Traefik (hack/traefik.sh: minutes, once) beside the install"
"$here/traefik.sh" >/dev/null 2>"$root/bin/run-traefik-build.log" &
traefik_build=$!

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

log "creating the APIGateway (with the default gateway for *.$domain)"
kubectl apply -f "$root/config/samples/operator_v1alpha1_apigateway.yaml" >/dev/null
kubectl wait --for=jsonpath='{.status.state}'=Ready apigateway/default --timeout 3m >/dev/null ||
	log "the APIGateway is not Ready yet: kubectl get apigw default -o yaml"

# There is no Istio data plane here (Envoy is not a Go module): the e2e
# suite's stand-in ingress gateway (e2e/agent) plays it. It serves the
# Gateways that select it as Istio's would for what Portico writes: TLS with
# the Secret a Gateway names, the HTTP-to-HTTPS redirect, VirtualService
# routes. A demo backend answers for the samples' orders Service.
log "running a stand-in ingress gateway (e2e/agent) in istio-system and a demo backend for shop/orders"
agent=$(cd "$root" && "$(release_tool release)" test-images --registry "$registry" --tag run e2e-agent | awk '$1 == "e2e-agent" {print $2}')
[[ -n "$agent" ]] || { log "no e2e-agent image"; exit 1; }
kubectl apply --server-side --field-manager=portico-run -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: istio-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ingress, namespace: istio-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: portico-run-ingress}
rules:
- {apiGroups: [networking.istio.io], resources: [gateways, virtualservices], verbs: [get, list]}
- {apiGroups: [""], resources: [services], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: portico-run-ingress}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: portico-run-ingress}
subjects: [{kind: ServiceAccount, name: ingress, namespace: istio-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: portico-run-ingress, namespace: istio-system}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: portico-run-ingress, namespace: istio-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: portico-run-ingress}
subjects: [{kind: ServiceAccount, name: ingress, namespace: istio-system}]
$(deployment istio-system ingress "istio: ingressgateway" ingress "[gateway, --gateway, istio-system/portico-gateway]")
---
apiVersion: v1
kind: Service
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: https, port: 443, targetPort: 8443}
$(deployment shop orders "app: orders" default "[backend, --name, orders]")
EOF
kubectl -n istio-system rollout status deployment/ingress --timeout 3m >/dev/null
kubectl -n shop rollout status deployment/orders --timeout 3m >/dev/null
kubectl wait --for=jsonpath='{.status.gateway.state}'=Ready apigateway/default --timeout 3m >/dev/null ||
	log "the default gateway is not Ready yet: kubectl get apigw default -o jsonpath='{.status.gateway}'"
ingress_ip=$(kubectl -n istio-system get service ingress -o jsonpath='{.spec.clusterIP}')

log "installing the Gateway API's standard CRDs; running Traefik for the GatewayClass traefik on 127.0.0.1:$traefik_port"
install_gateway_api
wait "$traefik_build" || { cat "$root/bin/run-traefik-build.log" >&2; die "building Traefik failed"; }
run_traefik

cat >&2 <<MSG

  Portico runs on node portico-node: the operator and every controller are
  pods; the default gateway serves *.$domain with a certificate of this
  cluster's own CA.

  export KUBECONFIG=$kubeconfig PATH=$bin:\$PATH
  kubectl get apigw                          # STATE Ready, READY 3/3, GATEWAY Ready
  kubectl get pods -n $namespace
  kubectl apply -f config/samples/           # shop/orders: Service, APIRule, RateLimit
  kubectl get apirule -n shop orders         # Ready
  kubectl -n istio-system get configmap portico-gateway-ca -o jsonpath='{.data.ca\.crt}' > /tmp/portico-ca.crt
  curl --cacert /tmp/portico-ca.crt --resolve orders.$domain:443:$ingress_ip https://orders.$domain/health
  curl -si --resolve orders.$domain:80:$ingress_ip http://orders.$domain/health   # 301 to https

  kubectl apply -f config/samples/gateway-api/    # Gateway shop/web (Traefik's), APIRule with parentRef
  kubectl get apirule -n shop orders-gateway-api  # Ready once Traefik accepted its HTTPRoute
  curl --resolve orders.gateway-api.test:$traefik_port:127.0.0.1 http://orders.gateway-api.test:$traefik_port/health

  # metrics: every binary serves :8080/metrics (docs/operations.md#metrics);
  # the chart can add a PodMonitor, a PrometheusRule and a Grafana dashboard
  kubectl -n $namespace port-forward service/portico-operator-metrics 18080:8080 &
  curl -s localhost:18080/metrics | grep '^portico_controller_phase'
  kubectl -n $namespace port-forward deployment/apirule-controller 18081:8080 &
  curl -s localhost:18081/metrics | grep -E '^portico_(apirules|spec_to_ready|objects_written)'

  make run-istio-remove   # delete Istio's CRDs: controllers removed, Blocked
  make run-istio          # apply them again: controllers roll out
  make run-down           # remove the node and the cluster

MSG
echo "$kubeconfig"
