// Package gatewayapi renders a checked plan (package plan) in HTTPRoute
// mode as one Gateway API HTTPRoute: one HTTPRoute rule per plan rule, in
// the plan's route order, with its matches, backends, timeout, CORS,
// rewrite and request headers. Access control stays Istio's (package
// render/istio). It refuses nothing and reads nothing from the cluster.
package gatewayapi
