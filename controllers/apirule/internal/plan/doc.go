// Package plan normalises an APIRule once into what every output needs
// (New): its rules in the APIRule's order and in the order routes are
// tried, each with its match, destinations and weights, effective timeout,
// request modifiers, the path its requests have at the backend and the
// access it requires (package access); its hosts, mode (Istio gateway or
// Gateway API parent) and the workloads that get access control, with the
// names of their policies. Check is the one place where the translation
// refuses an APIRule: every check, in the order its first refusal is
// reported. The renderers (render/istio, render/gatewayapi) read a checked
// plan and refuse nothing. Nothing here reads the cluster.
package plan
