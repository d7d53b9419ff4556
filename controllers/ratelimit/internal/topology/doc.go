// Package topology computes, from the whole state of the world, the
// EnvoyFilters that enforce Portico's RateLimits: it links Istio Gateways ←
// APIRules ← RateLimits, groups gateways by workload (namespace and pod
// selector), and renders one EnvoyFilter per workload that any RateLimit
// reaches, plus a verdict for every RateLimit (enforced, conflicted, target
// not found).
//
// Everything here is a pure, deterministic function of its input — no
// cluster access, no state — so the same world always yields byte-identical
// EnvoyFilters and a policy never needs back-references or annotations on
// other objects. Conflicts (two RateLimits limiting the same gateway scope
// or the same APIRule route) are resolved oldest-wins: policies are visited
// by creation time, then namespace and name, and a policy that would claim
// a scope already claimed loses entirely and is reported.
package topology
