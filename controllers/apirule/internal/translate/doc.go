// Package translate turns an APIRule into the Istio objects that implement
// it: one VirtualService (hosts, gateway, one HTTP route per rule to the
// service FQDN and port, timeouts, CORS) and, for every backend Service the
// rules route to, one AuthorizationPolicy on that Service's pods (the paths
// and methods of the rules routed there; JWT rules require a request
// principal of one of their issuers, pinned exactly, and, when given, the
// audience and scope claims of one of their authorization alternatives,
// one ALLOW rule per alternative) and, only when a rule routed there uses
// JWT, one RequestAuthentication (one JWT rule per issuer, with the places
// its tokens are read from).
//
// Istio allows a request that any ALLOW rule on a workload matches, so the
// translation refuses rules that would let one rule's callers into another
// rule's path with weaker authentication, on pods both may reach, and an
// issuer given two key sets or two sets of token places (Istio merges them);
// FuzzTranslate checks that no output does.
//
// Translation is pure and deterministic: it reads nothing from the cluster
// (the caller passes the pod selectors of the backend Services) and returns
// an error for rules the API server cannot reject by itself.
package translate
