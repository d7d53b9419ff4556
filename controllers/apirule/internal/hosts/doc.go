// Package hosts decides who owns a host name among APIRules.
//
// A host has one owner cluster-wide, whatever the gateway: Istio merges
// the routes of every VirtualService with the same host on a gateway's
// pods, so two owners would serve each other's unrouted paths. The owner
// is the oldest claim (creation time, then namespace and name): hosts of
// an APIRule cannot change, so a claim dates from the APIRule's creation
// and no edit can move it ahead of another. A wildcard host covers every
// name under it and overlaps each of those names; it counts only when the
// cluster administrator grants it to the claim's namespace, so a tenant
// can neither take nor block a whole domain by itself. The decision is a
// pure function of the claims, so it is the same on every reconcile and
// never flaps.
package hosts
