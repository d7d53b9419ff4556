// Package metrics is what the rate-limit service reports to Prometheus, in
// controller-runtime's registry like every Portico process: decisions by
// code, decision latency, whether Redis answers, and the tenant
// configurations loaded. No series has a per-tenant, per-limit or
// per-client label, so the cardinality is fixed by the code whatever
// tenants send.
package metrics
