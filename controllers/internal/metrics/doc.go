// Package metrics is what the gateway controllers report to Prometheus
// beyond controller-runtime's series: their objects by Ready condition, the
// time from a spec change to Ready, the objects they write and the
// refusals they decide. Every series is registered in controller-runtime's
// registry (served on the process's metrics endpoint) and has no
// per-object or per-namespace label, so its cardinality is bounded by the
// code, not by what tenants create.
//
// Gauges of the cluster's state (CacheGauge) come from the informer cache
// of the workers that run now, which only the replica holding the leader
// Lease has (package runner): computed at scrape time, or, for the Ready
// gauges, counted from the informer's events as they come (a scrape then
// reads a few counts, not every cached object). A scrape makes no API
// request and starts no reconcile, and every other replica exports none of
// them, so sums over replicas are not doubled. Counters and the
// histogram are updated where the controllers write, and only successful
// writes count.
//
// The package decides nothing about the controllers' objects: which
// reasons are refusals and what is Ready is theirs to say.
package metrics
