// Package globallimit is what the ratelimit controller, Portico's
// rate-limit service and the gateways' Envoy filters agree on for global
// rate limits, written down once:
//
//   - the service's name, port and Envoy cluster (Service, ClusterName);
//   - the per-tenant domain (Domain, NamespaceOf): the ratelimit controller
//     writes the domain "portico/<namespace>" of a RateLimit's namespace
//     into the filter, never one a tenant chooses;
//   - the tenant token (Token): the first descriptor entry of every
//     descriptor, an HMAC of the namespace under a key only the controller
//     and the service read (a Secret in Portico's namespace). A tenant
//     that reaches the service directly can name another tenant's domain
//     but cannot produce its token, so it can neither raise another's usage
//     nor read its counts;
//   - the configuration feed (Config, in one ConfigMap per tenant
//     namespace in Portico's namespace): which limits a domain has, by the
//     limit entry (LimitKey) of the descriptor.
//
// The package holds no behaviour beyond pure functions and parsing.
package globallimit
