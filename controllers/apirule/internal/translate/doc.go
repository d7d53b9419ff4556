// Package translate turns an APIRule into the Istio objects that implement
// it: one VirtualService (hosts, gateway, one HTTP route per rule to the
// service FQDN and port, timeouts, CORS), one AuthorizationPolicy (per-rule
// paths and methods; JWT rules require a request principal of the issuer
// and, when given, audience and scope claims) and, only when a rule uses
// JWT, one RequestAuthentication (issuer, jwksUri).
//
// Translation is pure and deterministic: it reads nothing from the cluster
// (the caller passes the workload selector of the backend Service) and
// returns an error for rules the API server cannot reject by itself.
package translate
