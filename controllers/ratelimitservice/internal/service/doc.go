// Package service answers Envoy's RateLimitService v3 ShouldRateLimit for
// Portico's global rate limits.
//
// A call names a domain, globallimit.Domain(namespace), and descriptors
// written by the ratelimit controller into the gateways' filters. Every
// descriptor must start with the tenant token entry {globallimit.TokenKey,
// globallimit.Token(key, namespace)}, checked in constant time, and the
// limit entry {globallimit.LimitKey, limit id}. A domain that is not
// Portico's, a missing or wrong token (another tenant's included), a
// descriptor without its limit entry, or no key loaded fails the whole
// call with PermissionDenied, before anything is counted. A limit id the
// tenant's configuration does not (yet) have, or a namespace without a
// configuration, answers OK for that descriptor: the configuration may lag
// the filters by a watch event.
//
// The remaining entries, whatever their keys (client keys such as
// "header:x-api-key", "remote_address", "claim:<issuer>:<name>", and the
// rule's match entry), are the client key: ClientHash hashes them, with
// each key's and value's length, so that no raw value reaches Redis and
// no two entry lists share a hash. A descriptor with no remaining entries
// is one budget shared by every client.
//
// The answer is OVER_LIMIT when any descriptor of a limit that is not a
// shadow limit is over; a shadow limit counts, answers OK and is recorded
// as shadow_over_limit. Each descriptor's status carries its code, the
// limit (requests per unit), what remains and the time until the budget
// resets, for Envoy's x-ratelimit headers. A per-descriptor hits_addend
// overrides the request's; negative hits (refunds) and the descriptor's
// limit override are ignored: only the tenant's configuration sets
// budgets.
//
// When Redis fails the call answers Unavailable: Envoy then applies the
// filter's failure mode (fail open unless the administrator chose
// otherwise). Counting is package store's; this package only checks,
// plans and maps.
package service
