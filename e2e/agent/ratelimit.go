package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The gateway stand-in's global rate limiting: it reads the EnvoyFilters
// that reach its pods (those of its own namespace and of Istio's root
// namespace whose workloadSelector its labels match), finds the global rate
// limit HTTP filters they insert (envoy.filters.http.ratelimit, wrapped in a
// TypedStruct) and the routes' per-filter config of those filters, and for
// every request does what Envoy's filter does: it builds the descriptors
// from the rate limit actions (generic_key, header_value_match,
// request_headers with skip_if_absent, remote_address; metadata — a
// validated JWT's claim — is always absent here, as the stand-in validates
// no token), calls the rate-limit service named by the filter's cluster
// with the filter's domain, and answers 429 when it says OVER_LIMIT, or,
// when the service cannot answer, 500 if the filter fails closed and lets
// the request pass if it fails open.

const (
	globalRateLimitType = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit"
	perRouteType        = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute"
)

// globalFilter is one inserted global rate limit filter, as configured.
type globalFilter struct {
	source     string // namespace/name of its EnvoyFilter
	name       string
	domain     string
	failClosed bool
	timeout    time.Duration
	cluster    string
	// filterLimits are the filter's own rate_limits (a gateway-wide
	// limit); routeLimits the per-route ones by Envoy route name.
	filterLimits []any
	routeLimits  map[string][]any
}

// workload is the stand-in's pods: their namespace and labels.
type workload struct {
	namespace string
	labels    map[string]string
	root      string
}

// loadGlobalFilters reads the global rate limit filters that reach w.
func loadGlobalFilters(ctx context.Context, c client.Client, w workload) ([]globalFilter, error) {
	var list networkingv1alpha3.EnvoyFilterList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list EnvoyFilters: %w", err)
	}
	var out []globalFilter
	for _, ef := range list.Items {
		if ef.Namespace != w.namespace && ef.Namespace != w.root {
			continue
		}
		sel := ef.Spec.GetWorkloadSelector().GetLabels()
		if len(sel) == 0 || !selects(sel, w.labels) {
			continue
		}
		filters := map[string]*globalFilter{}
		var order []string
		for _, p := range ef.Spec.GetConfigPatches() {
			raw, err := protojson.Marshal(p.GetPatch().GetValue())
			if err != nil {
				continue
			}
			value := decode(raw)
			switch p.GetApplyTo().String() {
			case "HTTP_FILTER":
				tc, _ := value["typed_config"].(map[string]any)
				if tc["type_url"] != globalRateLimitType {
					continue
				}
				cfg, _ := tc["value"].(map[string]any)
				name, _ := value["name"].(string)
				f := &globalFilter{source: ef.Namespace + "/" + ef.Name, name: name, routeLimits: map[string][]any{}}
				f.domain, _ = cfg["domain"].(string)
				f.failClosed, _ = cfg["failure_mode_deny"].(bool)
				f.timeout = parseDuration(cfg["timeout"], 20*time.Millisecond)
				f.filterLimits, _ = cfg["rate_limits"].([]any)
				f.cluster = lookup(cfg, "rate_limit_service", "grpc_service", "envoy_grpc", "cluster_name")
				filters[name] = f
				order = append(order, name)
			case "HTTP_ROUTE":
				route := p.GetMatch().GetRouteConfiguration().GetVhost().GetRoute().GetName()
				perFilter, _ := value["typed_per_filter_config"].(map[string]any)
				for name, cfg := range perFilter {
					typed, _ := cfg.(map[string]any)
					if typed["type_url"] != perRouteType {
						continue
					}
					limits, _ := typed["value"].(map[string]any)["rate_limits"].([]any)
					if f := filters[name]; f != nil {
						f.routeLimits[route] = limits
					}
				}
			}
		}
		for _, name := range order {
			out = append(out, *filters[name])
		}
	}
	return out, nil
}

func decode(raw []byte) map[string]any {
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return v
}

func lookup(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, _ := cur.(map[string]any)
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

func parseDuration(v any, def time.Duration) time.Duration {
	s, _ := v.(string)
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return def
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// descriptors builds the descriptors of rate_limits for r, as Envoy does:
// a descriptor whose action cannot produce its entry is left out.
func descriptors(limits []any, r *http.Request) []*corev3.RateLimitDescriptor {
	var out []*corev3.RateLimitDescriptor
	for _, l := range limits {
		actions, _ := l.(map[string]any)["actions"].([]any)
		d := &corev3.RateLimitDescriptor{}
		ok := true
		for _, a := range actions {
			action, _ := a.(map[string]any)
			entry, keep := entryOf(action, r)
			if !keep {
				ok = false
				break
			}
			if entry != nil {
				d.Entries = append(d.Entries, entry)
			}
		}
		if ok && len(d.Entries) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// entryOf is one action's entry: nil with keep to skip just the entry,
// keep false to leave out the descriptor.
func entryOf(action map[string]any, r *http.Request) (entry *corev3.RateLimitDescriptor_Entry, keep bool) {
	if g, ok := action["generic_key"].(map[string]any); ok {
		key, _ := g["descriptor_key"].(string)
		if key == "" {
			key = "generic_key"
		}
		value, _ := g["descriptor_value"].(string)
		return &corev3.RateLimitDescriptor_Entry{Key: key, Value: value}, true
	}
	if m, ok := action["header_value_match"].(map[string]any); ok {
		headers, _ := m["headers"].([]any)
		for _, h := range headers {
			hm, _ := h.(map[string]any)
			name, _ := hm["name"].(string)
			sm, _ := hm["string_match"].(map[string]any)
			value := r.Header.Get(name)
			present := len(r.Header.Values(name)) > 0
			if name == ":path" {
				value, present = r.URL.RequestURI(), true
			}
			if !present {
				return nil, false
			}
			if p, ok := sm["prefix"].(string); ok && !strings.HasPrefix(value, p) {
				return nil, false
			}
			if e, ok := sm["exact"].(string); ok && value != e {
				return nil, false
			}
		}
		key, _ := m["descriptor_key"].(string)
		value, _ := m["descriptor_value"].(string)
		return &corev3.RateLimitDescriptor_Entry{Key: key, Value: value}, true
	}
	if h, ok := action["request_headers"].(map[string]any); ok {
		name, _ := h["header_name"].(string)
		key, _ := h["descriptor_key"].(string)
		skip, _ := h["skip_if_absent"].(bool)
		values := r.Header.Values(name)
		if len(values) == 0 {
			return nil, skip
		}
		return &corev3.RateLimitDescriptor_Entry{Key: key, Value: strings.Join(values, ",")}, true
	}
	if _, ok := action["remote_address"]; ok {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		return &corev3.RateLimitDescriptor_Entry{Key: "remote_address", Value: host}, true
	}
	if m, ok := action["metadata"].(map[string]any); ok {
		skip, _ := m["skip_if_absent"].(bool)
		return nil, skip // no validated token here
	}
	return nil, false
}

// limiter calls the rate-limit services the filters name.
type limiter struct {
	rt *router
	mu sync.Mutex
	// conns are the connections by cluster (a Service's cluster IP), or
	// by endpoint address when resolve is set.
	conns map[string]*grpc.ClientConn
	// resolve, when set, gives the host:port of an Envoy cluster (the
	// xDS mode's endpoints) instead of its Service's cluster IP.
	resolve func(ctx context.Context, cluster string) (string, error)
}

// check applies every global filter to r on the route named route and
// returns the status to answer with, 0 to let the request pass.
func (l *limiter) check(r *http.Request, filters []globalFilter, route string) (int, string) {
	for _, f := range filters {
		limits := f.filterLimits
		if rl, ok := f.routeLimits[route]; ok {
			limits = rl
		}
		ds := descriptors(limits, r)
		if len(ds) == 0 {
			continue
		}
		code, err := l.call(r.Context(), f, ds)
		switch {
		case err != nil && f.failClosed:
			return http.StatusInternalServerError, fmt.Sprintf("rate-limit service failed (%v); %s fails closed", err, f.source)
		case err != nil:
			log.Printf("rate-limit service failed (%v); %s fails open", err, f.source)
		case code == rlsv3.RateLimitResponse_OVER_LIMIT:
			return http.StatusTooManyRequests, "over the limit of " + f.source
		}
	}
	return 0, ""
}

func (l *limiter) call(ctx context.Context, f globalFilter, ds []*corev3.RateLimitDescriptor) (rlsv3.RateLimitResponse_Code, error) {
	conn, err := l.conn(ctx, f.cluster)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: f.domain, Descriptors: ds})
	if err != nil {
		return 0, err
	}
	return resp.GetOverallCode(), nil
}

// conn dials the service of an Envoy cluster outbound|<port>||<host>,
// resolved to its Service's cluster IP through the API (no cluster DNS).
func (l *limiter) conn(ctx context.Context, cluster string) (*grpc.ClientConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resolve != nil {
		// The cluster's endpoints are read on every call, as Envoy's load
		// balancer picks from the endpoints it has now: a connection kept
		// per cluster would stay on a replaced pod's address and every
		// call after would fail (open).
		addr, err := l.resolve(ctx, cluster)
		if err != nil {
			return nil, err
		}
		if c, ok := l.conns[addr]; ok {
			return c, nil
		}
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		l.conns[addr] = c
		return c, nil
	}
	if c, ok := l.conns[cluster]; ok {
		return c, nil
	}
	parts := strings.Split(cluster, "|")
	if len(parts) != 4 || parts[0] != "outbound" {
		return nil, fmt.Errorf("cluster %q is not outbound|<port>||<host>", cluster)
	}
	if _, err := strconv.Atoi(parts[1]); err != nil {
		return nil, fmt.Errorf("cluster %q: port: %w", cluster, err)
	}
	ip, err := l.rt.serviceAddress(ctx, parts[3], "")
	if err != nil {
		return nil, err
	}
	c, err := grpc.NewClient(net.JoinHostPort(ip, parts[1]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	l.conns[cluster] = c
	return c, nil
}
