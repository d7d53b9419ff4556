package istio

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// envoyRequest is what Envoy's router matches a request on.
type envoyRequest struct {
	Host, Path, Method string
	// Query is the request's query string, without "?".
	Query   string
	Headers map[string]string
}

// header returns a request header as Envoy's matchers see it: pseudo
// headers for host and method, others by lower-case name.
func (r envoyRequest) header(name string) (string, bool) {
	switch strings.ToLower(name) {
	case ":authority", "host":
		return r.Host, true
	case ":method":
		return r.Method, true
	case ":path":
		if r.Query != "" {
			return r.Path + "?" + r.Query, true
		}
		return r.Path, true
	}
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// envoyVirtualHost picks the virtual host Envoy's router picks for a host:
// an exact domain, else the longest suffix wildcard, else the longest
// prefix wildcard, else "*". A domain with a port matches host:port only.
func envoyVirtualHost(rc *routev3.RouteConfiguration, host string) *routev3.VirtualHost {
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

// envoyRoute is the first route of the virtual host that matches the
// request, as Envoy's router takes it, or nil.
func envoyRoute(vh *routev3.VirtualHost, r envoyRequest) (*routev3.Route, error) {
	for _, rt := range vh.GetRoutes() {
		ok, err := envoyRouteMatches(rt.GetMatch(), r)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", rt.GetName(), err)
		}
		if ok {
			return rt, nil
		}
	}
	return nil, nil
}

func envoyRouteMatches(m *routev3.RouteMatch, r envoyRequest) (bool, error) {
	path := r.Path
	caseSensitive := m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue()
	fold := func(s string) string {
		if caseSensitive {
			return s
		}
		return strings.ToLower(s)
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		if !strings.HasPrefix(fold(path), fold(ps.Prefix)) {
			return false, nil
		}
	case *routev3.RouteMatch_Path:
		if fold(path) != fold(ps.Path) {
			return false, nil
		}
	case *routev3.RouteMatch_PathSeparatedPrefix:
		p := fold(ps.PathSeparatedPrefix)
		if fp := fold(path); fp != p && !strings.HasPrefix(fp, p+"/") {
			return false, nil
		}
	case *routev3.RouteMatch_SafeRegex:
		ok, err := fullMatch(ps.SafeRegex.GetRegex(), path)
		if err != nil || !ok {
			return false, err
		}
	default:
		return false, fmt.Errorf("path specifier %T is not modelled", ps)
	}
	for _, h := range m.GetHeaders() {
		ok, err := headerMatches(h, r)
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

// compiled caches the regular expressions of Envoy's configuration.
var compiled sync.Map

// fullMatch is Envoy's safe_regex: RE2, matching the whole value.
func fullMatch(re, value string) (bool, error) {
	if c, ok := compiled.Load(re); ok {
		return c.(*regexp.Regexp).MatchString(value), nil
	}
	c, err := regexp.Compile("^(?:" + re + ")$")
	if err != nil {
		return false, fmt.Errorf("regex %q: %w", re, err)
	}
	compiled.Store(re, c)
	return c.MatchString(value), nil
}

func headerMatches(h *routev3.HeaderMatcher, r envoyRequest) (bool, error) {
	value, present := r.header(h.GetName())
	if !present && h.GetTreatMissingHeaderAsEmpty() {
		value, present = "", true
	}
	var ok bool
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		ok = present == s.PresentMatch
	case *routev3.HeaderMatcher_StringMatch:
		m, err := stringMatches(s.StringMatch, value)
		if err != nil {
			return false, err
		}
		ok = present && m
	default:
		return false, fmt.Errorf("header matcher %v is not modelled", h)
	}
	if h.GetInvertMatch() {
		return !ok, nil
	}
	return ok, nil
}

func stringMatches(m *matcherv3.StringMatcher, value string) (bool, error) {
	v := value
	fold := func(s string) string { return s }
	if m.GetIgnoreCase() {
		fold = strings.ToLower
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(v) == fold(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(v), fold(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(v), fold(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(v), fold(p.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		return fullMatch(p.SafeRegex.GetRegex(), v)
	}
	return false, fmt.Errorf("string matcher %v is not modelled", m)
}

func queryMatches(q *routev3.QueryParameterMatcher, values url.Values) (bool, error) {
	vs, present := values[q.GetName()]
	switch s := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_PresentMatch:
		return present == s.PresentMatch, nil
	case *routev3.QueryParameterMatcher_StringMatch:
		if !present {
			return false, nil
		}
		// Envoy matches the first value of a parameter.
		return stringMatches(s.StringMatch, vs[0])
	}
	return false, fmt.Errorf("query parameter matcher %v is not modelled", q)
}

// envoyRewrite is the path Envoy forwards after the route's rewrite.
func envoyRewrite(rt *routev3.Route, path string) (string, error) {
	a := rt.GetRoute()
	switch {
	case a.GetPathRewritePolicy() != nil:
		return "", fmt.Errorf("path rewrite policies are not modelled")
	case a.GetRegexRewrite() != nil:
		re, err := regexp.Compile(a.GetRegexRewrite().GetPattern().GetRegex())
		if err != nil {
			return "", err
		}
		sub := regexp.MustCompile(`\\(\d)`).ReplaceAllString(a.GetRegexRewrite().GetSubstitution(), `$${$1}`)
		return re.ReplaceAllString(path, sub), nil
	case a.GetPrefixRewrite() == "":
		return path, nil
	}
	switch ps := rt.GetMatch().GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		return a.GetPrefixRewrite() + path[len(ps.Prefix):], nil
	case *routev3.RouteMatch_PathSeparatedPrefix:
		return a.GetPrefixRewrite() + path[len(ps.PathSeparatedPrefix):], nil
	}
	return a.GetPrefixRewrite(), nil
}

// envoyClusters are the clusters a route sends requests to, with weights.
func envoyClusters(rt *routev3.Route) map[string]uint32 {
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
