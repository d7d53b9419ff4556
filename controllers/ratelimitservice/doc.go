// Command portico-ratelimit-service is Portico's global rate limit
// service: it answers the RateLimitService v3 calls (ShouldRateLimit) of
// the gateways' Envoy rate limit filters (envoy.filters.http.ratelimit)
// from the limits the ratelimit controller publishes, counting in Redis.
// The operator runs it as the Deployment globallimit.ServiceName in
// Portico's namespace ($POD_NAMESPACE); every replica serves and all share
// one Redis, so a budget is global (--leader-elect is accepted and
// ignored).
//
// Domains and tokens. The controller writes the domain
// globallimit.Domain(namespace) of a RateLimit's namespace into the
// filter, and starts every descriptor with the tenant token (an HMAC of
// the namespace under the key Secret globallimit.KeySecretName) and the
// limit id. The service checks the token in constant time: a tenant that
// reaches the service directly can name another tenant's domain but not
// produce its token, so it can neither spend nor read another's budgets. A
// bad token, domain or descriptor — or no key loaded — fails the whole call
// with PermissionDenied before anything is counted. A limit id the
// tenant's configuration does not have yet answers OK (the ConfigMap may
// lag the filter by one watch event).
//
// Keys. The descriptor's remaining entries (client keys: header values,
// the client address, JWT claims, the rule's match) are hashed with
// SHA-256, lengths included, into a 128-bit client hash; raw values never
// reach Redis. Counters live under "portico:{<namespace>}:<limit id>:…",
// and every key has a TTL.
//
// Algorithms. FixedWindow counts hits per window floor(now / unit) and is
// over when the count exceeds the limit's requests. TokenBucket is GCRA:
// the bucket holds Limit.Capacity() tokens and refills requests per unit;
// refused hits do not consume. Both run as one Lua script per descriptor,
// taking the time from Redis (TIME), so replicas share one clock; all
// descriptors of a call go in one pipelined round trip.
//
// Bounds. At most --max-keys-per-rule distinct client keys get a budget of
// their own per limit and window; clients beyond share the limit's one
// overflow budget until the window ends, so a flood of distinct header
// values cannot grow Redis without bound or evict other tenants' keys.
//
// Shadow limits count as usual, answer OK and are recorded in the
// shadow_over_limit decisions.
//
// Failure. When Redis fails or times out the call answers Unavailable and
// Envoy applies the filter's failure mode (fail open by default); the
// replica reports Redis down (portico_ratelimit_service_redis_up 0) and
// fails /readyz until a ping (every two seconds, and at once after a
// failure) succeeds. /readyz also waits for the first sync of the
// ConfigMap and Secret watches. A ConfigMap that is untrusted or does not
// parse keeps its namespace's last good configuration. The Redis
// connection (--redis-config-dir) and the configurations are re-read
// without a restart.
//
// Packages: internal/service decides a call, internal/store counts in
// Redis, internal/config watches the feed, internal/server runs the
// process, internal/metrics names the series, internal/bench is `make
// bench-ratelimit-service`.
package main
