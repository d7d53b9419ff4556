// Package envoy evaluates Envoy's typed configuration (go-control-plane's
// types) for one request, as Envoy does, and nothing else: it never reads
// Portico's or Istio's objects, only what a control plane sends an Envoy.
//
// It owns the pieces of Envoy the e2e's stand-ins imitate and the offline
// check (test/istio) compares the tenancy judge with:
//
//   - the router: the virtual host a host selects (exact domain, then the
//     longest suffix wildcard, then the longest prefix wildcard, then "*"),
//     the first route whose match holds (path, prefix, safe_regex,
//     path_separated_prefix, uri_template; headers; query parameters;
//     case_sensitive), its clusters and weights, the path and host it
//     forwards after prefix, regex and uri-template rewrites, the header
//     mutations of every level (weighted cluster, route, virtual host,
//     route configuration), direct responses and redirects;
//   - the HTTP filters of a sidecar's inbound chain: RBAC (rules and shadow
//     rules, with the dynamic metadata shadow rules emit), jwt_authn
//     (providers' token locations, requirements, the verified payload as
//     metadata) and ext_authz's filter_enabled_metadata; the ext_authz call
//     and the token's signature are the caller's (a function it passes).
//
// A filter's typed config is read as Envoy reads it: the message, or a
// udpa/xds TypedStruct of its type (UnpackTyped), the form an EnvoyFilter
// patch writes and istiod passes through unchanged.
//
// What Envoy can say that is not modelled is an error, never a guess:
// callers count or report it.
package envoy
