// Package topology computes, from the whole state of the world, the
// EnvoyFilters that enforce Portico's RateLimits: it links gateways ←
// APIRules ← RateLimits and the pods the gateways select, renders one
// EnvoyFilter per gateway workload (pod selector) and RateLimit namespace,
// and gives a verdict for every RateLimit (enforced, conflicted, not
// enforced, target not found, invalid).
//
// A gateway is an Istio Gateway, whose selector names its pods, or a
// Gateway API Gateway, whose pods Istio runs in the Gateway's namespace
// labelled gateway.networking.k8s.io/gateway-name: <name>; that label is
// the filter's workload selector, and the Gateway's pods are those of its
// own namespace (a same-named Gateway elsewhere has pods labelled alike).
// Istio names the Envoy routes of an APIRule's VirtualService by RouteName,
// unique on a gateway; in HTTPRoute mode it names them by the HTTPRoute
// rule's name alone (Istio 1.24 and later), which any HTTPRoute may use, so
// there a route limit is bound to the APIRule's virtual hosts
// (<host>:<listener port>) as well.
//
// Tenants are namespaces, and no filter mixes them: an EnvoyFilter holds
// the claims of one namespace's RateLimits and inserts an HTTP filter of its
// own name, so one tenant's RateLimits can neither change, stale nor remove
// another's, nor fail them by making a shared filter too large
// (MaxEnvoyFilterBytes). A filter lives in its RateLimits' namespace when
// every pod the gateway selects runs there; otherwise in Istio's root
// namespace, whose workloadSelector reaches the pods of every namespace —
// never in another tenant's namespace. A gateway-wide limit throttles every
// request through its pods, so it acts only on the selected pods of the
// RateLimit's own namespace, with a filter there: look-alike pods of other
// namespaces are neither limited nor able to switch it off, and whose
// Gateways also select the pods does not matter. In Istio's root namespace,
// whose filters reach every namespace, it applies only when every selected
// pod runs there.
//
// Everything here is a pure, deterministic function of its input — no
// cluster access, no state — so the same world always yields byte-identical
// EnvoyFilters and a policy never needs back-references or annotations on
// other objects. Conflicts are decided per pod group (the pods of one
// namespace with the same labels), whichever filters the claims are in:
// two RateLimits limiting the same gateway-wide scope or the same APIRule
// route, or a gateway-wide limit and route limits on the same pods (a
// route's own bucket and descriptors replace the gateway-wide ones in
// Envoy). They are resolved oldest-wins, in two passes: first the limits on
// pods of their own namespace (every gateway-wide limit, and route limits
// whose pods all run in their namespace), then route limits on pods of
// other namespaces. Within a pass policies are visited by creation time,
// then namespace and name, and a policy that would claim a scope already
// held loses entirely and is reported, naming the holder only to its own
// namespace. So the namespace where the pods run decides about them first,
// and no other tenant's route limit, however old, can displace its limits.
package topology
