// Package translate turns an APIRule into the objects that implement it,
// in three steps, each its own package: plan.New normalises the APIRule
// into a plan, plan.Check refuses what cannot be enforced as written (the
// one place for every refusal), and the renderers write the plan out:
// render/istio the VirtualService (Istio mode) and the access control of
// every backend in the APIRule's namespace (ALLOW and CUSTOM
// AuthorizationPolicies, RequestAuthentications), render/gatewayapi the
// HTTPRoute (HTTPRoute mode). The access model and the comparison of
// access control across APIRules are package access's.
//
// Istio allows a request that any ALLOW rule on a workload matches, so the
// checks refuse rules that would let one rule's callers into another
// rule's path with weaker authentication, on pods both may reach, and an
// issuer given two key sets or two sets of token places (Istio merges
// them); FuzzTranslate checks that no output does.
//
// Translation is pure and deterministic: it reads nothing from the cluster
// (the caller passes the pod selectors of the backend Services). The golden
// files and this package's tests hold its behaviour.
package translate
