// Package controller runs the ratelimit controller's state-of-the-world
// reconcile. Every event — a RateLimit, an APIRule, an Istio Gateway or one
// of the EnvoyFilters it manages — maps to one global key; each reconcile
// reads the whole topology from the caches, lets the pure topology package
// compute every EnvoyFilter and every RateLimit's verdict, writes only the
// EnvoyFilters that differ, deletes the ones no policy needs, and writes a
// RateLimit's status only when it changed.
//
// Every EnvoyFilter holds the RateLimits of one namespace, and each is
// written on its own: a filter over its size budget
// (topology.MaxEnvoyFilterBytes) is not written, one whose name a foreign
// object holds is left alone, and one the API server refuses is retried;
// in each case only the RateLimits in that filter report EnvoyFilterFailed,
// and every other filter is still written in the same pass.
//
// Why one global key rather than one per gateway workload: conflicts and
// targets cross objects (a RateLimit reaches a workload through an APIRule
// and a Gateway that can change independently), so a per-workload key would
// have to map every old and new position of every object to keys; the
// global key needs no such bookkeeping, a burst of events collapses into one
// pass (the queue holds one key), and since writes are diffed a change to
// one RateLimit writes nothing for the others. Computing the topology of
// 1,000 policies from memory takes well under a millisecond per reconcile.
//
// A reconcile's reads follow the RateLimits, not the cluster: it gets only
// the APIRules they target, and the watches drop what cannot change the
// topology (APIRules no RateLimit targets, status writes, pods no Gateway
// selects), looking up targets and selectors through field indexes
// (indexes.go) rather than listing. BenchmarkReconcile keeps that true at
// 10,000 APIRules.
package controller
