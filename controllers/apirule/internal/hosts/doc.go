// Package hosts decides who owns a host name among APIRules.
//
// A host has one owner cluster-wide, whatever the gateway: Istio merges
// the routes of every VirtualService with the same host on a gateway's
// pods, so two owners would serve each other's unrouted paths.
//
// The cluster administrator may give names to namespaces (APIGateway
// spec.apiRules.ownedHosts): a name an ownership entry covers can be claimed
// only by APIRules of the namespaces it lists. A claim of any other
// namespace on such a name is refused and holds nothing, whatever its age,
// so nobody can squat an owned name by waiting for its owner to delete and
// re-create an APIRule, and nobody can block an owned wildcard with an
// exact name under it.
//
// Among the claims that may hold a name, the owner is the oldest claim:
// creation time, then, within the same second (the resolution of
// creationTimestamp), the APIRule's UID, which nobody chooses: no tenant
// wins ties by the name of its namespace. Hosts of an APIRule cannot
// change, so a claim dates from the APIRule's creation and no edit can
// move it ahead of another. A wildcard host covers every name under it and
// overlaps each of those names; it counts only when the administrator
// grants it to the claim's namespace (spec.apiRules.wildcardHosts, or an
// ownership entry of that wildcard), so a tenant can neither take nor block
// a whole domain by itself. The decision is a pure function of the claims,
// so it is the same on every reconcile and never flaps.
package hosts
