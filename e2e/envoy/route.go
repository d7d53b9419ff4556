package envoy

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	uritemplatematchv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
)

// VirtualHost picks the virtual host Envoy's router picks for a host: an
// exact domain, else the longest suffix wildcard ("*.example.com",
// "*-b.example.com"), else the longest prefix wildcard ("example.*"), else
// "*"; nil when none covers it. Domains are compared without case; a
// domain with a port covers host:port only.
func VirtualHost(rc *routev3.RouteConfiguration, host string) *routev3.VirtualHost {
	host = strings.ToLower(host)
	var best *routev3.VirtualHost
	bestRank, bestLen := 0, -1
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			rank, n := 0, len(d)
			switch {
			case d == host:
				return vh
			case strings.HasPrefix(d, "*") && d != "*" && strings.HasSuffix(host, d[1:]) && len(host) > len(d)-1:
				rank = 3
			case strings.HasSuffix(d, "*") && d != "*" && strings.HasPrefix(host, d[:len(d)-1]) && len(host) > len(d)-1:
				rank = 2
			case d == "*":
				rank = 1
			}
			if rank > bestRank || rank == bestRank && rank > 0 && n > bestLen {
				best, bestRank, bestLen = vh, rank, n
			}
		}
	}
	return best
}

// Route is the first route of the virtual host whose match holds for the
// request, as Envoy's router takes it, or nil.
func Route(vh *routev3.VirtualHost, r Request) (*routev3.Route, error) {
	for _, rt := range vh.GetRoutes() {
		ok, err := RouteMatches(rt.GetMatch(), r)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", rt.GetName(), err)
		}
		if ok {
			return rt, nil
		}
	}
	return nil, nil
}

// RouteMatches is Envoy's RouteMatch: the path specifier (case-sensitive
// unless case_sensitive is false), then every header and query parameter
// matcher. Runtime fractions, gRPC, TLS context and dynamic metadata
// matches are not modelled.
func RouteMatches(m *routev3.RouteMatch, r Request) (bool, error) {
	ok, err := pathMatches(m, r.Path)
	if err != nil || !ok {
		return false, err
	}
	for _, h := range m.GetHeaders() {
		ok, err := HeaderMatches(h, r)
		if err != nil || !ok {
			return false, err
		}
	}
	if len(m.GetQueryParameters()) > 0 {
		values, err := url.ParseQuery(r.Query)
		if err != nil {
			return false, err
		}
		for _, q := range m.GetQueryParameters() {
			ok, err := queryMatches(q, values)
			if err != nil || !ok {
				return false, err
			}
		}
	}
	if m.GetRuntimeFraction() != nil || m.GetGrpc() != nil || m.GetTlsContext() != nil || len(m.GetDynamicMetadata()) > 0 {
		return false, fmt.Errorf("route match %v is not modelled", m)
	}
	return true, nil
}

func pathMatches(m *routev3.RouteMatch, path string) (bool, error) {
	caseSensitive := m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue()
	fold := func(s string) string {
		if caseSensitive {
			return s
		}
		return strings.ToLower(s)
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		return strings.HasPrefix(fold(path), fold(ps.Prefix)), nil
	case *routev3.RouteMatch_Path:
		return fold(path) == fold(ps.Path), nil
	case *routev3.RouteMatch_PathSeparatedPrefix:
		p, fp := fold(ps.PathSeparatedPrefix), fold(path)
		return fp == p || strings.HasPrefix(fp, p+"/"), nil
	case *routev3.RouteMatch_SafeRegex:
		return fullMatch(ps.SafeRegex.GetRegex(), path)
	case *routev3.RouteMatch_PathMatchPolicy:
		template, err := matchTemplate(m)
		if err != nil {
			return false, err
		}
		return URITemplateMatches(template, path)
	}
	return false, fmt.Errorf("path specifier %T is not modelled", m.GetPathSpecifier())
}

// matchTemplate is the uri_template of a route's path_match_policy.
func matchTemplate(m *routev3.RouteMatch) (string, error) {
	policy := m.GetPathMatchPolicy()
	cfg := &uritemplatematchv3.UriTemplateMatchConfig{}
	if err := policy.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		return "", fmt.Errorf("path match policy %s: %w", policy.GetName(), err)
	}
	return cfg.GetPathTemplate(), nil
}

// Clusters are the clusters a route sends requests to, with their weights
// (a single cluster weighs 1); nil for a route that does not forward.
func Clusters(rt *routev3.Route) map[string]uint32 {
	a := rt.GetRoute()
	if a == nil {
		return nil
	}
	if c := a.GetCluster(); c != "" {
		return map[string]uint32{c: 1}
	}
	out := map[string]uint32{}
	for _, c := range a.GetWeightedClusters().GetClusters() {
		out[c.GetName()] += c.GetWeight().GetValue()
	}
	return out
}

// PickCluster chooses the cluster of a forwarding route as Envoy's
// weighted clusters do (a cluster of weight 0 is never chosen), with n a
// draw in [0, total weight); pass -1 for a random draw. It returns the
// weighted cluster entry too (nil for a route of one cluster), whose
// header mutations apply.
func PickCluster(rt *routev3.Route, n int64) (string, *routev3.WeightedCluster_ClusterWeight, error) {
	a := rt.GetRoute()
	switch {
	case a == nil:
		return "", nil, fmt.Errorf("route %q does not forward", rt.GetName())
	case a.GetCluster() != "":
		return a.GetCluster(), nil, nil
	case a.GetWeightedClusters() == nil:
		return "", nil, fmt.Errorf("route %q: cluster specifier %T is not modelled", rt.GetName(), a.GetClusterSpecifier())
	}
	var total int64
	for _, c := range a.GetWeightedClusters().GetClusters() {
		total += int64(c.GetWeight().GetValue())
	}
	if total <= 0 {
		return "", nil, fmt.Errorf("route %q: weighted clusters weigh nothing", rt.GetName())
	}
	if n < 0 {
		n = rand.Int64N(total)
	}
	for _, c := range a.GetWeightedClusters().GetClusters() {
		if w := int64(c.GetWeight().GetValue()); n < w {
			return c.GetName(), c, nil
		}
		n -= int64(c.GetWeight().GetValue())
	}
	return "", nil, fmt.Errorf("route %q: draw beyond the total weight %d", rt.GetName(), total)
}
