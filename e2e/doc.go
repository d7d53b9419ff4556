// Package e2e holds Portico's end-to-end suite: one set of Ginkgo specs,
// each a user story, run against one of three targets (build tag e2e):
//
//   - local (default, `make test-e2e`): a real control plane — etcd,
//     kube-apiserver, kube-controller-manager, kube-scheduler built from Go
//     modules — with kwok nodes, so Deployments really roll out. The chart is
//     installed with helm with the operator scaled to zero; the operator and
//     each controller run as host processes whose kubeconfig impersonates the
//     ServiceAccount the chart created for them, so a missing RBAC rule fails
//     the suite. Controller processes are started from the args and env of
//     the Deployments the operator creates and stopped when it deletes them.
//   - node (`make test-e2e-node`, what `make test` runs; needs root): the
//     same control plane with admission on and one real node (hack/node.sh:
//     kubelet, containerd, kube-proxy). Every image is built without a
//     container engine (hack/release/cmd/images) and imported into the node, the chart
//     is installed, and the operator and controllers run as real pods with
//     their real ServiceAccount tokens in a namespace that enforces the
//     restricted Pod Security Standard. On top of the common specs it checks
//     the controllers' probe endpoints, PodSecurity admission, and real
//     traffic from a client pod routed as istiod computed from an
//     APIRule's VirtualService (the e2e agent in e2e/agent stands in for
//     Istio's ingress gateway, programmed by istiod over xDS). For
//     HTTPRoute mode it installs the Gateway API's CRDs while Portico runs
//     and runs a real implementation, Traefik (hack/traefik.sh), as a host
//     process: it accepts the APIRules' HTTPRoutes and routes to real pods.
//     A real Prometheus server (make builds it from test/monitoring's
//     Prometheus module) runs as a host process too: it scrapes the operator
//     and the controllers' pods as the chart's ServiceMonitor and PodMonitor
//     would and evaluates the chart's PrometheusRule (its `for`s shortened to
//     10s); specs cause faults and record how long each alert takes to fire
//     and to resolve (_artifacts/alert-timings.md), and every metric the
//     rules and the dashboard read must be among the series it scraped.
//     Global rate limits run on real parts too: Debian's redis-server
//     (hack/redis.sh) as a host process, Portico's rate-limit service as
//     the operator runs it, and three replicas of the gateway stand-in that
//     call it as the rate limit filters istiod generated from Portico's
//     EnvoyFilters say.
//     External authorization runs on real authorizers: oauth2-proxy
//     (hack/oauth2proxy.sh, packed into an image the suite pushes) as pods
//     in the tenants' namespaces, one logging browsers in with mockoidc (a
//     mock OIDC provider in the suite's process) and one per tenant
//     checking API keys; the backends' stand-in sidecars ask them as
//     Envoy's ext_authz filter does, with the providers of the mesh config
//     the docs give.
//     Istio's control plane is real too: istiod (hack/istiod.sh, the
//     Istio version test/istio pins) runs as a host process for the whole
//     suite with Istio's own RBAC (istiod_test.go); its validating webhook
//     admits every Istio object written during the e2e, it is the
//     controller of GatewayClass istio (the Gateway API story runs on an
//     Istio-class Gateway too, Ready from istiod's route status), and it
//     serves plaintext xDS on the node's address. No Envoy runs: the
//     agent routes in its place, programmed by istiod in every story:
//     the gateway stand-ins take their listeners (bound on istiod's
//     ports), routes, endpoints, TLS references and rate-limit filters
//     from istiod over ADS (xdsstandins_test.go; e2e/xds, e2e/envoy)
//     and never read a VirtualService; docs/operations.md lists what
//     istiod programs and what is imitated.
//     The backends are programmed by istiod by default: each one the
//     stories run is `e2e-agent backend --xds`, a sidecar node of its pod
//     with a ServiceAccount of its own (xdssidecars_test.go;
//     E2E_SIDECAR_XDS=off for plain backends), so a request Istio's
//     sidecar would refuse (no token, a bad one, an RBAC denial) is
//     refused, and explain's verdicts are compared for the backends too.
//     Both OLMs install and upgrade Portico from its catalog, built from
//     Go modules: OLM v0 (hack/testbin.sh --olm) as pods with its own
//     Helm chart (olm_test.go), then OLM v1 — catalogd and
//     operator-controller (hack/olmv1.sh) as host processes — to which
//     the cluster moves Portico as docs/releases.md says: a ClusterCatalog
//     serving the catalog over HTTPS, the sample ClusterExtension applied
//     by the installer ServiceAccount of config/olmv1, an upgrade through
//     the catalog with requests counted, and the ClusterExtension deleted
//     with the CRDs kept (olmv1_test.go).
//     The suite removes the node with everything it made (hack/node.sh
//     down) and stops Traefik, istiod, OLM v1 and Prometheus.
//   - kind (`make test-e2e-kind`, needs Docker and kind): a kind cluster, the
//     same images loaded as archives, the chart installed, real pods; no
//     istiod, so the gateway stand-in reads Gateways and VirtualServices
//     itself there.
//
// The package itself holds no code outside the e2e build tag.
package e2e
