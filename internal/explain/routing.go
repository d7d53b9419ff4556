package explain

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
)

// Destination is where a route sends requests.
type Destination struct {
	// Host as written in the VirtualService.
	Host string
	// Service and Namespace of a cluster-local host (<svc>.<ns>.svc.cluster.local,
	// or a short name relative to the VirtualService); empty otherwise.
	Service   string
	Namespace string
	Port      uint32
}

// Routed is the route a request takes through a gateway.
type Routed struct {
	// VirtualService is the namespace/name holding the route.
	VirtualService string
	Route          string
	// Passed are the routes of the same host the gateway tried first, in
	// its order, each with the condition that did not hold.
	Passed []Passed
	// Path is the path the destinations receive: the request's, or what
	// the route's rewrite made of it.
	Path string
	// Destinations is empty for a redirect or direct response.
	Destinations []Destination
	// RequestHeaders are the headers the route sets or adds on the request
	// (its own and its destinations'), by name; nil if none.
	RequestHeaders map[string]string
	// RemovedRequestHeaders are the request headers the route removes; the
	// Response fields its response header operations. Forward and Respond
	// (edge.go) apply them as the gateway's Envoy does.
	RemovedRequestHeaders []string
	ResponseSet           map[string]string
	ResponseAdd           map[string]string
	RemovedResponse       []string
}

// Passed is a route the gateway tried before the one it took.
type Passed struct {
	VirtualService string `json:"virtualService"`
	Route          string `json:"route"`
	// Why is the first of the route's conditions the request fails, one
	// per match of the route ("path ...; method ...").
	Why string `json:"why"`
}

// Route finds the route Istio's gateway ("namespace/name") takes for a
// request, or nil if none does. As in Istio, the most specific host wins
// (an exact host over the longest wildcard); the routes of every
// VirtualService bound to the gateway with that host are merged, oldest
// VirtualService first, and the first route that matches is taken. A
// route it reaches that matches on headers or query parameters is an
// error: whether a request without them is routed would depend on what
// the caller left out (RouteProbe takes them).
func Route(vss []*networkingv1.VirtualService, gateway, host, path, method string) (*Routed, error) {
	return RouteProbe(vss, gateway, Probe{Host: host, Path: path, Method: method, headersUnknown: true})
}

// Probe is a request as the gateway's router matches it.
type Probe struct {
	Host, Path, Method string
	// Headers are the request's headers, one value each; names compare
	// regardless of case.
	Headers map[string]string
	// Query holds the request's query parameters; a parameter's first
	// value is the one matched, as in Envoy.
	Query url.Values
	// headersUnknown refuses header and query parameter matches (Route).
	headersUnknown bool
	// tls is true for a request over TLS (the scheme of a redirect).
	tls bool
}

// RouteProbe is Route for a request with headers and query parameters.
func RouteProbe(vss []*networkingv1.VirtualService, gateway string, p Probe) (*Routed, error) {
	bound := slices.DeleteFunc(slices.Clone(vss), func(vs *networkingv1.VirtualService) bool {
		return !slices.ContainsFunc(vs.Spec.Gateways, func(g string) bool { return bindsTo(g, vs.Namespace, gateway) })
	})
	vhost := virtualHost(bound, p.Host)
	if vhost == "" {
		return nil, nil
	}
	merged := slices.DeleteFunc(bound, func(vs *networkingv1.VirtualService) bool { return !slices.Contains(vs.Spec.Hosts, vhost) })
	slices.SortStableFunc(merged, func(a, b *networkingv1.VirtualService) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var passed []Passed
	for _, vs := range merged {
		for _, route := range vs.Spec.Http {
			why, err := routeMismatch(route, gateway, vs.Namespace, p)
			if err != nil {
				return nil, fmt.Errorf("VirtualService %s/%s route %q: %w", vs.Namespace, vs.Name, route.Name, err)
			}
			if why != "" {
				passed = append(passed, Passed{VirtualService: vs.Namespace + "/" + vs.Name, Route: route.Name, Why: why})
				continue
			}
			out := routed(vs, route)
			out.Passed = passed
			if out.Path, err = rewritten(route, gateway, vs.Namespace, p); err != nil {
				return nil, fmt.Errorf("VirtualService %s/%s route %q: %w", vs.Namespace, vs.Name, route.Name, err)
			}
			return out, nil
		}
	}
	return nil, nil
}

// bindsTo reports whether a VirtualService's gateway entry names gateway;
// a name without namespace is the VirtualService's namespace.
func bindsTo(entry, vsNamespace, gateway string) bool {
	if entry == "mesh" {
		return false
	}
	if !strings.Contains(entry, "/") {
		entry = vsNamespace + "/" + entry
	}
	return entry == gateway
}

// virtualHost picks the most specific host of the bound VirtualServices
// that covers the request's host: the exact host, else the longest
// wildcard ("*.example.com", then "*").
func virtualHost(vss []*networkingv1.VirtualService, host string) string {
	host = strings.ToLower(host)
	best := ""
	for _, vs := range vss {
		for _, h := range vs.Spec.Hosts {
			lower := strings.ToLower(h)
			switch {
			case lower == host:
				return h
			case lower == "*" || strings.HasPrefix(lower, "*") && strings.HasSuffix(host, lower[1:]):
				if len(h) > len(best) {
					best = h
				}
			}
		}
	}
	return best
}

// routeMismatch is why a route does not take the request ("" if it does):
// the reason each of its matches fails, joined.
func routeMismatch(route *networkingv1alpha3.HTTPRoute, gateway, vsNamespace string, p Probe) (string, error) {
	if route.Delegate != nil {
		return "", fmt.Errorf("delegated routes are not modelled")
	}
	whys := make([]string, 0, len(route.Match))
	for _, m := range route.Match {
		why, err := requestMismatch(m, gateway, vsNamespace, p)
		if err != nil || why == "" {
			return "", err
		}
		whys = append(whys, why)
	}
	return strings.Join(whys, "; or "), nil
}

// requestMismatch is the first condition of one match (they are ANDed)
// the request fails, "" when it meets them all.
func requestMismatch(m *networkingv1alpha3.HTTPMatchRequest, gateway, vsNamespace string, p Probe) (string, error) {
	if m.Scheme != nil || m.Port != 0 || len(m.SourceLabels) > 0 || m.SourceNamespace != "" {
		return "", fmt.Errorf("match %q uses conditions that are not modelled", m.Name)
	}
	if p.headersUnknown && (len(m.Headers) > 0 || len(m.WithoutHeaders) > 0 || len(m.QueryParams) > 0) {
		return "", fmt.Errorf("match %q matches headers or query parameters, which are not modelled without a probe (RouteProbe)", m.Name)
	}
	if len(m.Gateways) > 0 && !slices.ContainsFunc(m.Gateways, func(g string) bool { return bindsTo(g, vsNamespace, gateway) }) {
		return "the match is for other gateways", nil
	}
	path := p.Path
	if m.IgnoreUriCase {
		path = strings.ToLower(path)
	}
	for _, c := range []struct {
		what  string
		match *networkingv1alpha3.StringMatch
		value string
	}{{"path", m.Uri, path}, {"method", m.Method, p.Method}, {"authority", m.Authority, p.Host}} {
		ok, err := stringMatches(c.match, c.value)
		if err != nil || !ok {
			return fmt.Sprintf("%s %q does not match %s", c.what, c.value, describe(c.match)), err
		}
	}
	for _, c := range []struct {
		what    string
		matches map[string]*networkingv1alpha3.StringMatch
		value   func(string) (string, bool)
		without bool
	}{{"header", m.Headers, p.header, false}, {"header", m.WithoutHeaders, p.header, true}, {"query parameter", m.QueryParams, p.param, false}} {
		for _, name := range slices.Sorted(maps.Keys(c.matches)) {
			sm := c.matches[name]
			value, present := c.value(name)
			ok, err := presentAndMatches(sm, value, present)
			switch {
			case err != nil:
				return "", err
			case ok && c.without:
				return fmt.Sprintf("%s %s is present and matches %s, which the route excludes", c.what, name, describe(sm)), nil
			case !ok && !c.without && !present:
				return fmt.Sprintf("%s %s is absent", c.what, name), nil
			case !ok && !c.without:
				return fmt.Sprintf("%s %s %q does not match %s", c.what, name, value, describe(sm)), nil
			}
		}
	}
	return "", nil
}

// describe says a StringMatch as a reason quotes it.
func describe(m *networkingv1alpha3.StringMatch) string {
	switch t := m.GetMatchType().(type) {
	case *networkingv1alpha3.StringMatch_Exact:
		return fmt.Sprintf("exactly %q", t.Exact)
	case *networkingv1alpha3.StringMatch_Prefix:
		return fmt.Sprintf("prefix %q", t.Prefix)
	case *networkingv1alpha3.StringMatch_Regex:
		return fmt.Sprintf("regex %q", t.Regex)
	}
	return "anything"
}

// presentAndMatches applies a header or query parameter match: an empty
// match asks only that it be present, any other that it be present and
// match.
func presentAndMatches(m *networkingv1alpha3.StringMatch, value string, present bool) (bool, error) {
	if !present {
		return false, nil
	}
	return stringMatches(m, value)
}

func (p Probe) header(name string) (string, bool) {
	for k, v := range p.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func (p Probe) param(name string) (string, bool) {
	if v, ok := p.Query[name]; ok && len(v) > 0 {
		return v[0], true
	}
	return "", false
}

// stringMatches applies a VirtualService StringMatch; nil matches anything.
// A regex must match the whole value (Envoy's safe_regex).
func stringMatches(m *networkingv1alpha3.StringMatch, value string) (bool, error) {
	switch t := m.GetMatchType().(type) {
	case nil:
		return true, nil
	case *networkingv1alpha3.StringMatch_Exact:
		return value == t.Exact, nil
	case *networkingv1alpha3.StringMatch_Prefix:
		return strings.HasPrefix(value, t.Prefix), nil
	case *networkingv1alpha3.StringMatch_Regex:
		re, err := regexp.Compile("^(?:" + t.Regex + ")$")
		if err != nil {
			return false, fmt.Errorf("regex %q: %w", t.Regex, err)
		}
		return re.MatchString(value), nil
	}
	return false, fmt.Errorf("string match %v is not modelled", m)
}

func routed(vs *networkingv1.VirtualService, route *networkingv1alpha3.HTTPRoute) *Routed {
	out := &Routed{VirtualService: vs.Namespace + "/" + vs.Name, Route: route.Name}
	out.addRequestHeaders(route.GetHeaders().GetRequest())
	out.addResponseHeaders(route.GetHeaders().GetResponse())
	for _, d := range route.Route {
		if d.Weight == 0 && len(route.Route) > 1 {
			// Istio leaves a 0-weighted destination of a split out of
			// Envoy's weighted clusters: it receives nothing (Portico's
			// weight 0 drains a backend), nor do its header operations apply.
			continue
		}
		dest := Destination{Host: d.GetDestination().GetHost(), Port: d.GetDestination().GetPort().GetNumber()}
		dest.Service, dest.Namespace = resolve(dest.Host, vs.Namespace)
		out.Destinations = append(out.Destinations, dest)
		out.addRequestHeaders(d.GetHeaders().GetRequest())
		out.addResponseHeaders(d.GetHeaders().GetResponse())
	}
	return out
}

func (r *Routed) addRequestHeaders(ops *networkingv1alpha3.Headers_HeaderOperations) {
	r.RemovedRequestHeaders = append(r.RemovedRequestHeaders, ops.GetRemove()...)
	for _, m := range []map[string]string{ops.GetSet(), ops.GetAdd()} {
		for name, value := range m {
			if r.RequestHeaders == nil {
				r.RequestHeaders = map[string]string{}
			}
			r.RequestHeaders[name] = value
		}
	}
}

// resolve returns the Service and namespace of a cluster-local host.
func resolve(host, vsNamespace string) (service, namespace string) {
	if !strings.Contains(host, ".") {
		return host, vsNamespace
	}
	if rest, ok := strings.CutSuffix(host, ".svc.cluster.local"); ok {
		if svc, ns, ok := strings.Cut(rest, "."); ok && !strings.Contains(ns, ".") {
			return svc, ns
		}
	}
	return "", ""
}

// rewritten is the path a matching route forwards, as Envoy rewrites it:
// a uri rewrite replaces the prefix a prefix match matched, else the whole
// path; a regex rewrite replaces every match of its regex.
func rewritten(route *networkingv1alpha3.HTTPRoute, gateway, vsNamespace string, p Probe) (string, error) {
	path := p.Path
	rw := route.Rewrite
	switch {
	case rw == nil:
		return path, nil
	case rw.Authority != "":
		return "", fmt.Errorf("authority rewrites are not modelled")
	case rw.UriRegexRewrite != nil && rw.Uri != "":
		return "", fmt.Errorf("uri and uriRegexRewrite together are invalid")
	case rw.UriRegexRewrite != nil:
		if strings.Contains(rw.UriRegexRewrite.Rewrite, `\`) {
			return "", fmt.Errorf("regex rewrites with substitutions are not modelled")
		}
		re, err := regexp.Compile(rw.UriRegexRewrite.Match)
		if err != nil {
			return "", fmt.Errorf("regex rewrite %q: %w", rw.UriRegexRewrite.Match, err)
		}
		return re.ReplaceAllLiteralString(path, rw.UriRegexRewrite.Rewrite), nil
	case rw.Uri == "":
		return path, nil
	}
	for _, m := range route.Match {
		if why, err := requestMismatch(m, gateway, vsNamespace, p); err != nil || why != "" {
			continue
		}
		if prefix, isPrefix := m.GetUri().GetMatchType().(*networkingv1alpha3.StringMatch_Prefix); isPrefix {
			return rw.Uri + strings.TrimPrefix(path, prefix.Prefix), nil
		}
		return rw.Uri, nil
	}
	return rw.Uri, nil
}
