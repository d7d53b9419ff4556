package topology

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Envoy names used in the patches.
const (
	localRateLimitV3 = "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"
	typedStruct      = "type.googleapis.com/udpa.type.v1.TypedStruct"
	statPrefix       = "portico_local_ratelimit"
	descriptorKey    = "portico_descriptor"
)

func tokenBucket(b gatewayv1alpha1.TokenBucket) map[string]any {
	return map[string]any{
		"max_tokens":      float64(b.MaxTokens),
		"tokens_per_fill": float64(b.TokensPerFill),
		"fill_interval":   protoDuration(b.FillInterval.Duration),
	}
}

func percent(n float64) map[string]any {
	return map[string]any{"numerator": n, "denominator": "HUNDRED"}
}

// localRateLimit is the LocalRateLimit configuration of one claim: its
// bucket, enforcement, response headers and descriptor buckets.
func localRateLimit(spec gatewayv1alpha1.RateLimitSpec) map[string]any {
	enforced := 100.0
	if spec.Enforce != nil && !*spec.Enforce {
		enforced = 0 // shadow mode: counted, never rejected
	}
	cfg := map[string]any{
		"stat_prefix":     statPrefix,
		"token_bucket":    tokenBucket(*spec.Local),
		"filter_enabled":  map[string]any{"runtime_key": "portico_local_rate_limit_enabled", "default_value": percent(100)},
		"filter_enforced": map[string]any{"runtime_key": "portico_local_rate_limit_enforced", "default_value": percent(enforced)},
	}
	if spec.ResponseHeaders != nil && *spec.ResponseHeaders {
		cfg["enable_x_ratelimit_headers"] = "DRAFT_VERSION_03"
		cfg["response_headers_to_add"] = []any{map[string]any{
			"append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
			"header":        map[string]any{"key": "x-local-rate-limit", "value": "true"},
		}}
	}
	if len(spec.Descriptors) > 0 {
		var descriptors []any
		for i, d := range spec.Descriptors {
			bucket := *spec.Local
			if d.Bucket != nil {
				bucket = *d.Bucket
			}
			descriptors = append(descriptors, map[string]any{
				"entries":      []any{map[string]any{"key": descriptorKey, "value": descriptorValue(i)}},
				"token_bucket": tokenBucket(bucket),
			})
		}
		cfg["descriptors"] = descriptors
	}
	return cfg
}

func descriptorValue(i int) string { return fmt.Sprintf("d%d", i) }

// rateLimitActions produce one descriptor entry per matching descriptor.
func rateLimitActions(spec gatewayv1alpha1.RateLimitSpec) []any {
	var limits []any
	for i, d := range spec.Descriptors {
		var headers []any
		if d.Path != "" {
			headers = append(headers, map[string]any{"name": ":path", "string_match": map[string]any{"prefix": d.Path}})
		}
		if d.Header != nil {
			headers = append(headers, map[string]any{"name": d.Header.Name, "string_match": map[string]any{"exact": d.Header.Value}})
		}
		limits = append(limits, map[string]any{"actions": []any{map[string]any{"header_value_match": map[string]any{
			"descriptor_key":   descriptorKey,
			"descriptor_value": descriptorValue(i),
			"headers":          headers,
		}}}})
	}
	return limits
}

func typed(cfg map[string]any) map[string]any {
	return map[string]any{"@type": typedStruct, "type_url": localRateLimitV3, "value": cfg}
}

func mustStruct(v map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(v)
	if err != nil {
		panic(fmt.Sprintf("build patch value: %v", err)) // only JSON-like values are built here
	}
	return s
}

// listenerFilterPatch inserts the local rate limit filter, named name, before
// the router of every gateway listener. With a gateway-wide claim it carries
// the bucket; otherwise it is inert and routes activate it with per-route
// config keyed by its name.
func listenerFilterPatch(name string, gatewayClaim *claim) *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch {
	cfg := map[string]any{"stat_prefix": statPrefix}
	if gatewayClaim != nil && gatewayClaim.spec.Local != nil {
		cfg = localRateLimit(gatewayClaim.spec)
	}
	return httpFilterPatch(map[string]any{"name": name, "typed_config": typed(cfg)})
}

// globalFilterPatch inserts the global rate limit filter, named name,
// before the router of every gateway listener (after the local one, so a
// request the local bucket refuses costs the service nothing).
func globalFilterPatch(name string, cfg map[string]any) *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch {
	return httpFilterPatch(map[string]any{"name": name, "typed_config": map[string]any{"@type": typedStruct, "type_url": rateLimitV3, "value": cfg}})
}

// httpFilterPatch inserts an HTTP filter before the router of every gateway
// listener.
func httpFilterPatch(filter map[string]any) *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch {
	p := gatewayPatch(networkingv1alpha3.EnvoyFilter_HTTP_FILTER, networkingv1alpha3.EnvoyFilter_Patch_INSERT_BEFORE, filter)
	p.Match.ObjectTypes = &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectMatch_Listener{Listener: &networkingv1alpha3.EnvoyFilter_ListenerMatch{
		FilterChain: &networkingv1alpha3.EnvoyFilter_ListenerMatch_FilterChainMatch{
			Filter: &networkingv1alpha3.EnvoyFilter_ListenerMatch_FilterMatch{
				Name:      "envoy.filters.network.http_connection_manager",
				SubFilter: &networkingv1alpha3.EnvoyFilter_ListenerMatch_SubFilterMatch{Name: "envoy.filters.http.router"},
			},
		},
	}}
	return p
}

// virtualHostPatch adds the descriptor actions of a gateway-wide claim to
// every virtual host of the gateway.
func virtualHostPatch(c *claim) *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch {
	return gatewayPatch(networkingv1alpha3.EnvoyFilter_VIRTUAL_HOST, networkingv1alpha3.EnvoyFilter_Patch_MERGE,
		map[string]any{"rate_limits": rateLimitActions(c.spec)})
}

// routePatch gives one APIRule route its own bucket (and descriptor actions)
// in the filter named name: the routes of that name, in the claim's virtual
// host when it has one.
func routePatch(name string, c claim, global map[string]any) *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch {
	perFilter := map[string]any{}
	if c.spec.Local != nil {
		perFilter[name] = typed(localRateLimit(c.spec))
	}
	maps.Copy(perFilter, global)
	value := map[string]any{"typed_per_filter_config": perFilter}
	if len(c.spec.Descriptors) > 0 {
		value["route"] = map[string]any{"rate_limits": rateLimitActions(c.spec)}
	}
	p := gatewayPatch(networkingv1alpha3.EnvoyFilter_HTTP_ROUTE, networkingv1alpha3.EnvoyFilter_Patch_MERGE, value)
	// The virtual host is matched by name (<host>:<port>), which every Istio
	// release supports; matching its domain instead needs Istio 1.26, and an
	// older one would drop the field and match the route name everywhere.
	p.Match.ObjectTypes = &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectMatch_RouteConfiguration{RouteConfiguration: &networkingv1alpha3.EnvoyFilter_RouteConfigurationMatch{
		Vhost: &networkingv1alpha3.EnvoyFilter_RouteConfigurationMatch_VirtualHostMatch{
			Name:  c.route.vhost,
			Route: &networkingv1alpha3.EnvoyFilter_RouteConfigurationMatch_RouteMatch{Name: c.route.name},
		},
	}}
	return p
}

// gatewayPatch applies value with op to the gateway proxies' (not the
// sidecars') objects of kind applyTo; the caller narrows the match further.
func gatewayPatch(applyTo networkingv1alpha3.EnvoyFilter_ApplyTo, op networkingv1alpha3.EnvoyFilter_Patch_Operation, value map[string]any) *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch {
	return &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch{
		ApplyTo: applyTo,
		Match:   &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectMatch{Context: networkingv1alpha3.EnvoyFilter_GATEWAY},
		Patch:   &networkingv1alpha3.EnvoyFilter_Patch{Operation: op, Value: mustStruct(value)},
	}
}

// protoDuration writes d as google.protobuf.Duration's JSON form: seconds
// with at most nine exact fractional digits ("1.122s"). Formatting the
// float of seconds would write "1.1219999999999999s", which Envoy rejects.
func protoDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	seconds, nanos := d/time.Second, d%time.Second
	if nanos == 0 {
		return fmt.Sprintf("%s%ds", sign, seconds)
	}
	return sign + strings.TrimRight(fmt.Sprintf("%d.%09d", seconds, nanos), "0") + "s"
}
