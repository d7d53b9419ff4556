// Command bench measures the rate-limit service as `make
// bench-ratelimit-service` runs it: a real redis-server (hack/redis.sh) on
// a free port, the service in this process on a real gRPC listener (the
// packages service and store, with a fixed configuration instead of the
// Kubernetes watch), and many concurrent gRPC clients for a while per
// scenario:
//
//   - baseline: the same round trip for a limit the configuration does not
//     know, which needs no Redis;
//   - fixed-window and token-bucket: one client key per client goroutine;
//   - per-client-keys: a fixed window over many distinct client keys.
//
// It prints p50 and p99 decision latency and decisions per second of each,
// and Redis's used_memory per 10,000 client keys, and checks that a flood of
// distinct client keys stays within --max-keys-per-rule. It gates only
// figures of the same run: each scenario's p99 against the baseline's, the
// bytes per key and the key count — never an absolute time.
package main
