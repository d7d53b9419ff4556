package topology

import (
	"slices"
	"strings"
	"time"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
)

// Envoy names of the global rate limit filter.
const (
	rateLimitV3         = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit"
	rateLimitPerRouteV3 = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute"
	globalStatPrefix    = "portico_global_ratelimit"
	// globalStage keeps the filter from reading the route and virtual host
	// rate_limits of stage 0 (the local filter's descriptors, or anyone
	// else's): it sends only its own actions, from its own config (the
	// gateway-wide claim) or from the routes' per-filter config keyed by
	// its name (route claims), neither of which other tenants can write.
	globalStage = 1
	// jwtAuthnFilter is the namespace of the dynamic metadata where Envoy's
	// JWT filter records a validated token's payload, under the issuer
	// (Istio sets payload_in_metadata to the issuer of each jwt rule).
	jwtAuthnFilter = "envoy.filters.http.jwt_authn"
)

// Global is the administrator's global rate limiting, as the ratelimit
// controller runs it: nil in Input when it is not enabled.
type Global struct {
	// ServiceNamespace runs Portico's rate-limit service
	// (globallimit.ServiceName): Portico's namespace.
	ServiceNamespace string
	// FailOpen lets requests pass when the service cannot answer.
	FailOpen bool
	// Timeout bounds each decision; the gateway then applies FailOpen.
	Timeout time.Duration
	// Key signs each namespace's token (globallimit.Token).
	Key []byte
}

// HTTPGlobalFilterName is the name of the global rate limit HTTP filter
// that the EnvoyFilter of EnvoyFilterName(namespace, tenant, selector)
// inserts: unique per EnvoyFilter, as routes find their per-filter config
// by it.
func HTTPGlobalFilterName(namespace, tenant string, selector map[string]string) string {
	return "portico.ratelimit." + WorkloadID(namespace, tenant, selector)
}

// Units maps the API's units to the service's.
var Units = map[gatewayv1alpha1.RateLimitUnit]globallimit.Unit{
	gatewayv1alpha1.UnitSecond: globallimit.Second,
	gatewayv1alpha1.UnitMinute: globallimit.Minute,
	gatewayv1alpha1.UnitHour:   globallimit.Hour,
	gatewayv1alpha1.UnitDay:    globallimit.Day,
}

// limitsOf are the service's limits of one RateLimit's global rules.
func limitsOf(name string, spec gatewayv1alpha1.RateLimitSpec) []globallimit.Limit {
	if spec.Global == nil {
		return nil
	}
	shadow := spec.Enforce != nil && !*spec.Enforce
	headers := spec.ResponseHeaders != nil && *spec.ResponseHeaders
	var limits []globallimit.Limit
	for _, r := range spec.Global.Rules {
		l := globallimit.Limit{
			ID: globallimit.LimitID(name, r.Name), Requests: r.Requests, Unit: Units[r.Unit],
			Algorithm: globallimit.FixedWindow, Shadow: shadow, Headers: headers,
		}
		if r.Algorithm == gatewayv1alpha1.AlgorithmTokenBucket {
			l.Algorithm = globallimit.TokenBucket
			if r.Burst != nil {
				l.Burst = *r.Burst
			}
		}
		limits = append(limits, l)
	}
	return limits
}

// globalActions are the rate limit descriptors of a RateLimit's global
// rules: each starts with the tenant's token and the rule's limit, then
// the rule's match, then its client keys.
func globalActions(token, name string, spec gatewayv1alpha1.RateLimitSpec) []any {
	var out []any
	for _, r := range spec.Global.Rules {
		actions := []any{
			genericKey(globallimit.TokenKey, token),
			genericKey(globallimit.LimitKey, globallimit.LimitID(name, r.Name)),
		}
		if m := r.Match; m != nil {
			var headers []any
			if m.Path != "" {
				headers = append(headers, map[string]any{"name": ":path", "string_match": map[string]any{"prefix": m.Path}})
			}
			if m.Header != nil {
				headers = append(headers, map[string]any{"name": strings.ToLower(m.Header.Name), "string_match": map[string]any{"exact": m.Header.Value}})
			}
			actions = append(actions, map[string]any{"header_value_match": map[string]any{
				"descriptor_key": globallimit.MatchKey, "descriptor_value": "match", "headers": headers,
			}})
		}
		for _, k := range r.ClientKeys {
			actions = append(actions, clientKeyAction(k))
		}
		out = append(out, map[string]any{"actions": actions})
	}
	return out
}

func genericKey(key, value string) map[string]any {
	return map[string]any{"generic_key": map[string]any{"descriptor_key": key, "descriptor_value": value}}
}

// clientKeyAction is the descriptor entry of one client key. A value that
// is absent is skipped, not the descriptor: such requests share one
// budget instead of escaping the rule.
func clientKeyAction(k gatewayv1alpha1.ClientKey) map[string]any {
	switch k.Type {
	case gatewayv1alpha1.ClientKeyHeader:
		name := strings.ToLower(k.Header)
		return map[string]any{"request_headers": map[string]any{
			"header_name": name, "descriptor_key": globallimit.HeaderKeyPrefix + name, "skip_if_absent": true,
		}}
	case gatewayv1alpha1.ClientKeyJWTClaim:
		return map[string]any{"metadata": map[string]any{
			"descriptor_key": globallimit.ClaimKeyPrefix + k.Claim.Issuer + ":" + k.Claim.Name,
			"metadata_key": map[string]any{"key": jwtAuthnFilter, "path": []any{
				map[string]any{"key": k.Claim.Issuer}, map[string]any{"key": k.Claim.Name},
			}},
			"source":         "DYNAMIC",
			"skip_if_absent": true,
		}}
	}
	return map[string]any{"remote_address": map[string]any{}}
}

// globalRateLimit is the global filter's configuration for the RateLimits
// of tenant: the tenant's domain, the service, the failure mode, and the
// gateway-wide claim's descriptors when there is one.
func globalRateLimit(g *Global, tenant string, gatewayClaim *claim) map[string]any {
	cfg := map[string]any{
		"domain":            globallimit.Domain(tenant),
		"stage":             float64(globalStage),
		"failure_mode_deny": !g.FailOpen,
		"timeout":           protoDuration(g.Timeout),
		"stat_prefix":       globalStatPrefix,
		"rate_limit_service": map[string]any{
			"transport_api_version": "V3",
			"grpc_service": map[string]any{
				"envoy_grpc": map[string]any{"cluster_name": globallimit.ClusterName(g.ServiceNamespace)},
				"timeout":    protoDuration(g.Timeout),
			},
		},
		// The service returns each limit's figures only for RateLimits that
		// ask for response headers.
		"enable_x_ratelimit_headers": "DRAFT_VERSION_03",
	}
	if gatewayClaim != nil && gatewayClaim.spec.Global != nil {
		cfg["rate_limits"] = globalActions(globallimit.Token(g.Key, tenant), gatewayClaim.policy.Name, gatewayClaim.spec)
	}
	return cfg
}

// globalRoute is a route claim's per-filter config of the global filter.
func globalRoute(g *Global, tenant string, c claim) map[string]any {
	return map[string]any{"@type": typedStruct, "type_url": rateLimitPerRouteV3, "value": map[string]any{
		"rate_limits": globalActions(globallimit.Token(g.Key, tenant), c.policy.Name, c.spec),
	}}
}

// usesGlobal reports whether any claim has global rules.
func usesGlobal(claims []claim) bool {
	return slices.ContainsFunc(claims, func(c claim) bool { return c.spec.Global != nil })
}

// usesLocal reports whether any claim has a local bucket.
func usesLocal(claims []claim) bool {
	return slices.ContainsFunc(claims, func(c claim) bool { return c.spec.Local != nil })
}
