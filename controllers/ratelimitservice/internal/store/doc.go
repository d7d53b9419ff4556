// Package store decides global rate limits in Redis: one Lua script per
// decision, all the descriptors of a request in one pipelined round trip,
// with the time taken from Redis (TIME) so that every replica of the
// service shares one clock.
//
// Keys are "portico:{<namespace>}:<limit id>:<algorithm>:…": the hash tag
// keeps a tenant's keys in one slot, and client keys appear only as hashes
// the caller computes. FixedWindow counts in "…:c:<client>:<window>" with
// window = floor(now / unit), expiring unit + Slack after its first hit;
// TokenBucket keeps one GCRA timestamp (the theoretical arrival time) in
// "…:c:<client>", expiring when the bucket is full again plus Slack. Every
// key the scripts write has a TTL.
//
// The number of distinct client keys of a limit is bounded: a counter per
// (namespace, limit, window) — the token bucket's window is the time the
// bucket takes to fill — counts the client keys created in it, and once it
// reaches MaxKeys, clients without a key of their own share the limit's one
// overflow budget until the window ends. A tenant's flood of distinct
// header values thus costs at most about 2×MaxKeys keys per limit (this
// window's and the last's).
//
// Errors are returned, never hidden: the caller answers Unavailable. An
// error that is neither Redis's own answer nor the caller giving up (a
// connection failure or a timeout) marks Redis down at once; the pinger
// (Run) marks it up again. Decisions are never retried: a retried script
// could count twice. The package knows nothing of gRPC, tokens or
// Kubernetes.
package store
