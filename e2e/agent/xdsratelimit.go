package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/portico-dev/portico/e2e/envoy"
)

// Global rate limits in the xDS mode: the gateway's connection manager's
// envoy.filters.http.ratelimit filters as istiod sent them (from Portico's
// EnvoyFilters: TypedStructs, which istiod passes through and Envoy
// converts, read by envoy.UnpackTyped), each with the rate limits of the route's
// typed_per_filter_config for it (RateLimitPerRoute), else its own
// rate_limits, else the route action's; descriptors by e2e/envoy; a call
// to the rate-limit service of the filter's cluster (an endpoint from
// xDS) with its domain and timeout; 429 over the limit, and on a failed
// call failure_mode_deny's 500 or the request let through.

// xdsRateLimit returns the status to answer with, 0 to let r pass.
func (g *xdsGateway) xdsRateLimit(r *http.Request, hcm *hcmv3.HttpConnectionManager, rt *routev3.Route) (int, string, error) {
	for _, f := range hcm.GetHttpFilters() {
		cfg := &ratelimitv3.RateLimit{}
		if f.GetDisabled() {
			continue
		}
		if ok, err := envoy.UnpackTyped(f.GetTypedConfig(), cfg); err != nil {
			return 0, "", fmt.Errorf("filter %s: %w", f.GetName(), err)
		} else if !ok {
			continue
		}
		limits, err := routeLimits(f.GetName(), cfg, rt)
		if err != nil {
			return 0, "", err
		}
		ds, err := envoy.Descriptors(limits, envoy.FromHTTP(r), remoteIP(r), nil)
		if err != nil {
			return 0, "", fmt.Errorf("filter %s: %w", f.GetName(), err)
		}
		if len(ds) == 0 {
			continue
		}
		gf := globalFilter{source: "filter " + f.GetName(), name: f.GetName(), domain: cfg.GetDomain(), failClosed: cfg.GetFailureModeDeny(),
			timeout: cfg.GetTimeout().AsDuration(), cluster: cfg.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()}
		if gf.timeout == 0 {
			gf.timeout = 20 * time.Millisecond // Envoy's default
		}
		code, err := g.rt.limiter.call(r.Context(), gf, rlsDescriptors(ds))
		switch {
		case err != nil && gf.failClosed:
			return http.StatusInternalServerError, fmt.Sprintf("rate-limit service failed (%v); %s fails closed", err, gf.source), nil
		case err != nil:
			log.Printf("rate-limit service failed (%v); %s fails open", err, gf.source)
		case code == rlsv3.RateLimitResponse_OVER_LIMIT:
			return http.StatusTooManyRequests, "over the limit of " + gf.source, nil
		}
	}
	return 0, "", nil
}

// routeLimits are the rate limits a filter applies on a route.
func routeLimits(filter string, cfg *ratelimitv3.RateLimit, rt *routev3.Route) ([]*routev3.RateLimit, error) {
	if per, ok := rt.GetTypedPerFilterConfig()[filter]; ok {
		pr := &ratelimitv3.RateLimitPerRoute{}
		if ok, err := envoy.UnpackTyped(per, pr); err != nil || !ok {
			return nil, fmt.Errorf("route %s: per-filter config of %s is not a RateLimitPerRoute (%s): %v", rt.GetName(), filter, per.GetTypeUrl(), err)
		}
		if len(pr.GetRateLimits()) > 0 {
			return pr.GetRateLimits(), nil
		}
	}
	if len(cfg.GetRateLimits()) > 0 {
		return cfg.GetRateLimits(), nil
	}
	return rt.GetRoute().GetRateLimits(), nil
}

func rlsDescriptors(ds [][]envoy.Entry) []*commonratelimitv3.RateLimitDescriptor {
	out := make([]*commonratelimitv3.RateLimitDescriptor, 0, len(ds))
	for _, d := range ds {
		rd := &commonratelimitv3.RateLimitDescriptor{}
		for _, e := range d {
			rd.Entries = append(rd.Entries, &commonratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		out = append(out, rd)
	}
	return out
}

// resolveFromXDS gives the limiter the endpoints of the clusters istiod
// sent.
func (g *xdsGateway) resolveFromXDS(_ context.Context, cluster string) (string, error) {
	return endpointOf(g.xds.Current(), cluster)
}
