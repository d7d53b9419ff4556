package topology

import (
	"errors"
	"fmt"
	"slices"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
)

// strictJSON rejects fields Envoy does not know, as Istio's EnvoyFilter
// validation does.
var strictJSON = protojson.UnmarshalOptions{DiscardUnknown: false}

// patchCounts tells how many patches of each kind a validation saw, so
// tests can prove they covered every kind.
type patchCounts map[networkingv1alpha3.EnvoyFilter_ApplyTo]int

// validateEnvoyFilter parses every patch value of an EnvoyFilter into the
// typed Envoy proto Istio builds from it and runs its generated validation:
// an inserted HttpFilter as is; a MERGE into a virtual host or route merged
// into a minimal valid one, as Istio merges it into the real one. Every
// TypedStruct is opened and its value parsed and validated as the
// LocalRateLimit it claims to be, and every per-route config must name an
// HTTP filter the same EnvoyFilter inserts (else Envoy ignores it).
func validateEnvoyFilter(ef *networkingv1alpha3client.EnvoyFilter, seen patchCounts) error {
	filters := map[string]bool{}
	var errs []error
	for i, cp := range ef.Spec.ConfigPatches {
		if err := validatePatch(cp, filters); err != nil {
			errs = append(errs, fmt.Errorf("%s/%s patch %d (%s): %w", ef.Namespace, ef.Name, i, cp.GetApplyTo(), err))
		}
		if seen != nil {
			seen[cp.GetApplyTo()]++
		}
	}
	return errors.Join(errs...)
}

func validatePatch(cp *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch, filters map[string]bool) error {
	if cp.GetMatch().GetContext() != networkingv1alpha3.EnvoyFilter_GATEWAY {
		return fmt.Errorf("context %s, want GATEWAY", cp.GetMatch().GetContext())
	}
	raw, err := protojson.Marshal(cp.GetPatch().GetValue())
	if err != nil {
		return fmt.Errorf("marshal value: %w", err)
	}
	switch cp.GetApplyTo() {
	case networkingv1alpha3.EnvoyFilter_HTTP_FILTER:
		if op := cp.GetPatch().GetOperation(); op != networkingv1alpha3.EnvoyFilter_Patch_INSERT_BEFORE {
			return fmt.Errorf("operation %s, want INSERT_BEFORE", op)
		}
		if sub := cp.GetMatch().GetListener().GetFilterChain().GetFilter().GetSubFilter().GetName(); sub != "envoy.filters.http.router" {
			return fmt.Errorf("inserted before %q, want the router", sub)
		}
		filter := &hcmv3.HttpFilter{}
		if err := strictJSON.Unmarshal(raw, filter); err != nil {
			return fmt.Errorf("parse HttpFilter: %w", err)
		}
		if err := filter.ValidateAll(); err != nil {
			return fmt.Errorf("HttpFilter: %w", err)
		}
		if filters[filter.GetName()] {
			return fmt.Errorf("HTTP filter %q inserted twice", filter.GetName())
		}
		filters[filter.GetName()] = true
		_, err := parseTyped(filter.GetTypedConfig(), localRateLimitV3, rateLimitV3)
		return err
	case networkingv1alpha3.EnvoyFilter_VIRTUAL_HOST:
		patch := &routev3.VirtualHost{}
		if err := strictJSON.Unmarshal(raw, patch); err != nil {
			return fmt.Errorf("parse VirtualHost: %w", err)
		}
		host := &routev3.VirtualHost{Name: "portico-test", Domains: []string{"*"}}
		proto.Merge(host, patch)
		if err := host.ValidateAll(); err != nil {
			return fmt.Errorf("merged VirtualHost: %w", err)
		}
		if len(patch.GetRateLimits()) == 0 {
			return errors.New("virtual host patch without rate_limits")
		}
		return nil
	case networkingv1alpha3.EnvoyFilter_HTTP_ROUTE:
		if cp.GetMatch().GetRouteConfiguration().GetVhost().GetRoute().GetName() == "" {
			return errors.New("route patch without a route name: it would change every route")
		}
		patch := &routev3.Route{}
		if err := strictJSON.Unmarshal(raw, patch); err != nil {
			return fmt.Errorf("parse Route: %w", err)
		}
		route := &routev3.Route{
			Name:   "portico-test",
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "backend"}}},
		}
		proto.Merge(route, patch)
		if err := route.ValidateAll(); err != nil {
			return fmt.Errorf("merged Route: %w", err)
		}
		if len(patch.GetTypedPerFilterConfig()) == 0 {
			return errors.New("route patch without typed_per_filter_config")
		}
		for name, cfg := range patch.GetTypedPerFilterConfig() {
			if !filters[name] {
				return fmt.Errorf("per-route config for HTTP filter %q, which this EnvoyFilter does not insert", name)
			}
			msg, err := parseTyped(cfg, localRateLimitV3, rateLimitPerRouteV3)
			if err != nil {
				return err
			}
			switch m := msg.(type) {
			case *localratelimitv3.LocalRateLimit:
				if m.GetTokenBucket() == nil {
					return fmt.Errorf("per-route config for %q without a token bucket", name)
				}
			case *ratelimitv3.RateLimitPerRoute:
				if len(m.GetRateLimits()) == 0 {
					return fmt.Errorf("per-route config for %q without rate_limits", name)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("unexpected applyTo %s", cp.GetApplyTo())
}

// parseTyped opens a TypedStruct-wrapped config of one of the types
// allowed (LocalRateLimit, RateLimit, RateLimitPerRoute) and validates it.
func parseTyped(cfg *anypb.Any, allowed ...string) (proto.Message, error) {
	wrapper := &udpatypev1.TypedStruct{}
	if err := cfg.UnmarshalTo(wrapper); err != nil {
		return nil, fmt.Errorf("typed_config is %s, not a TypedStruct: %w", cfg.GetTypeUrl(), err)
	}
	var msg interface {
		proto.Message
		ValidateAll() error
	}
	switch wrapper.GetTypeUrl() {
	case localRateLimitV3:
		msg = &localratelimitv3.LocalRateLimit{}
	case rateLimitV3:
		msg = &ratelimitv3.RateLimit{}
	case rateLimitPerRouteV3:
		msg = &ratelimitv3.RateLimitPerRoute{}
	}
	if msg == nil || !slices.Contains(allowed, wrapper.GetTypeUrl()) {
		return nil, fmt.Errorf("TypedStruct wraps %s, want one of %v", wrapper.GetTypeUrl(), allowed)
	}
	raw, err := protojson.Marshal(wrapper.GetValue())
	if err != nil {
		return nil, fmt.Errorf("marshal TypedStruct value: %w", err)
	}
	if err := strictJSON.Unmarshal(raw, msg); err != nil {
		return nil, fmt.Errorf("parse %s: %w", wrapper.GetTypeUrl(), err)
	}
	if err := msg.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", wrapper.GetTypeUrl(), err)
	}
	return msg, nil
}
