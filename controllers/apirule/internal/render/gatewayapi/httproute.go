package gatewayapi

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/paths"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// HTTPRoute is the HTTPRoute of a plan in HTTPRoute mode: one rule per
// plan rule (named by its RuleName, so a policy can address it), one match
// per method. The Gateway API ranks matches itself (exact paths, then the
// longest prefix, then methods, more header matches, more query-parameter
// matches) and breaks ties by rule order, which is the plan's route order,
// as the VirtualService's: both send a request to the same rule.
func HTTPRoute(p *plan.Plan) *gwapiv1.HTTPRoute {
	r, parent := p.APIRule, p.Parent
	route := &gwapiv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwapiv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: p.ObjectMeta(r.Namespace, r.Name),
	}
	ref := gwapiv1.ParentReference{
		Group:     ptr.To(gwapiv1.Group(parent.Group)),
		Kind:      ptr.To(gwapiv1.Kind(parent.Kind)),
		Namespace: ptr.To(gwapiv1.Namespace(parent.Namespace)),
		Name:      gwapiv1.ObjectName(parent.Name),
	}
	if parent.SectionName != "" {
		ref.SectionName = ptr.To(gwapiv1.SectionName(parent.SectionName))
	}
	route.Spec.ParentRefs = []gwapiv1.ParentReference{ref}
	for _, h := range p.Hosts {
		route.Spec.Hostnames = append(route.Spec.Hostnames, gwapiv1.Hostname(h))
	}
	cors := corsFilter(p.CORS)
	for _, rule := range p.Routes {
		out := gwapiv1.HTTPRouteRule{
			Name:        ptr.To(gwapiv1.SectionName(rule.RuleName)),
			Matches:     PathMatches(rule),
			BackendRefs: backendRefs(r.Namespace, rule),
		}
		if rule.Timeout != nil {
			out.Timeouts = &gwapiv1.HTTPRouteTimeouts{Request: ptr.To(gwapiv1.Duration(Duration(rule.Timeout.Duration)))}
		}
		if cors != nil {
			out.Filters = append(out.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterCORS, CORS: cors.DeepCopy()})
		}
		if rw := urlRewrite(rule.Rewrite); rw != nil {
			out.Filters = append(out.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterURLRewrite, URLRewrite: rw})
		}
		out.Filters = append(out.Filters, headerFilters(rule)...)
		route.Spec.Rules = append(route.Spec.Rules, out)
	}
	return route
}

// backendRefs are the Services of a rule: weighted backends with their
// percentages (the Gateway API's weights are relative; these add up to
// 100), a rule's only Service with the weight 1.
func backendRefs(namespace string, rule *plan.Rule) []gwapiv1.HTTPBackendRef {
	var out []gwapiv1.HTTPBackendRef
	for _, d := range rule.Destinations {
		weight := d.Weight
		if !rule.Weighted {
			weight = 1
		}
		ref := gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
			Group: ptr.To(gwapiv1.Group("")), Kind: ptr.To(gwapiv1.Kind("Service")),
			Name: gwapiv1.ObjectName(d.Service.Name), Port: ptr.To(d.Service.Port),
		}, Weight: ptr.To(weight)}}
		if d.Service.Namespace != namespace {
			ref.Namespace = ptr.To(gwapiv1.Namespace(d.Service.Namespace))
		}
		out = append(out, ref)
	}
	return out
}

// PathMatches are a rule's matches: its path (a template as a regular
// expression), once per method, each with the rule's header and
// query-parameter matches. A prefix rule "/orders/*" matches the path
// elements under /orders/ (and /orders itself, which the Gateway API's
// PathPrefix includes; the access policy, which allows /orders/* only,
// still refuses it at the workload).
func PathMatches(rule *plan.Rule) []gwapiv1.HTTPRouteMatch {
	path := &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchExact), Value: ptr.To(rule.Path)}
	if paths.IsPrefix(rule.Path) {
		prefix := strings.TrimSuffix(rule.Path, "*")
		if prefix != "/" {
			prefix = strings.TrimSuffix(prefix, "/")
		}
		path = &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchPathPrefix), Value: ptr.To(prefix)}
	}
	if paths.IsTemplate(rule.Path) {
		// RE2, which Istio's Gateway API implementation reads as the
		// VirtualService does.
		path = &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchRegularExpression), Value: ptr.To(paths.Regex(rule.Path))}
	}
	if len(rule.Methods) == 0 {
		match := gwapiv1.HTTPRouteMatch{Path: path}
		addMatches(rule.Match, &match)
		return []gwapiv1.HTTPRouteMatch{match}
	}
	matches := make([]gwapiv1.HTTPRouteMatch, 0, len(rule.Methods))
	for _, m := range rule.Methods {
		match := gwapiv1.HTTPRouteMatch{Path: path.DeepCopy(), Method: ptr.To(gwapiv1.HTTPMethod(m))}
		addMatches(rule.Match, &match)
		matches = append(matches, match)
	}
	return matches
}

// urlRewrite is a rule's rewrite as a URLRewrite filter: ReplaceFullPath,
// or ReplacePrefixMatch of the PathPrefix match ("/orders" by "/v2/orders",
// the Gateway API's prefixes having no final '/').
func urlRewrite(rw *porticov1alpha1.Rewrite) *gwapiv1.HTTPURLRewriteFilter {
	if rw == nil {
		return nil
	}
	if rw.Path != "" {
		return &gwapiv1.HTTPURLRewriteFilter{Path: &gwapiv1.HTTPPathModifier{
			Type: gwapiv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To(string(rw.Path)),
		}}
	}
	prefix := string(rw.Prefix)
	if prefix != "/" {
		prefix = strings.TrimSuffix(prefix, "/")
	}
	return &gwapiv1.HTTPURLRewriteFilter{Path: &gwapiv1.HTTPPathModifier{
		Type: gwapiv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To(prefix),
	}}
}

// Duration writes a duration the Gateway API's way: up to four
// units of h, m, s and ms ("1h30m", "2s500ms"). The APIRule's timeouts are
// whole milliseconds from 1ms to 1h, which always fit.
func Duration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, unit := range []struct {
		size time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / unit.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, unit.name)
			d -= n * unit.size
		}
	}
	return b.String()
}

// defaultCORSMaxAge is the Gateway API's default CORS maxAge, in seconds.
const defaultCORSMaxAge = 5

// corsFilter is the APIRule's CORS policy as a Gateway API CORS filter.
func corsFilter(c *porticov1alpha1.CORSPolicy) *gwapiv1.HTTPCORSFilter {
	if c == nil {
		return nil
	}
	f := &gwapiv1.HTTPCORSFilter{AllowCredentials: c.AllowCredentials}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			// Any origin: the others add nothing, and the Gateway API
			// refuses "*" beside them.
			f.AllowOrigins = []gwapiv1.CORSOrigin{"*"}
			break
		}
		f.AllowOrigins = append(f.AllowOrigins, gwapiv1.CORSOrigin(o))
	}
	for _, m := range plan.MethodStrings(c.AllowMethods) {
		f.AllowMethods = append(f.AllowMethods, gwapiv1.HTTPMethodWithWildcard(m))
	}
	for _, h := range c.AllowHeaders {
		f.AllowHeaders = append(f.AllowHeaders, gwapiv1.HTTPHeaderName(h))
	}
	for _, h := range c.ExposeHeaders {
		f.ExposeHeaders = append(f.ExposeHeaders, gwapiv1.HTTPHeaderName(h))
	}
	// The API server's default, written out so the live route compares
	// equal.
	f.MaxAge = defaultCORSMaxAge
	if c.MaxAge != nil {
		f.MaxAge = int32(c.MaxAge.Duration / time.Second)
	}
	return f
}

// valueMatch is one value match as the Gateway API's: Exact, or a
// RegularExpression, which for a prefix is the quoted prefix followed by
// ".*" (Envoy matches the whole value, as Istio's prefix does its start).
func valueMatch(exact, prefix, regex string) (exactMatch bool, value string) {
	switch {
	case exact != "":
		return true, exact
	case prefix != "":
		return false, regexp.QuoteMeta(prefix) + ".*"
	default:
		return false, regex
	}
}

// addMatches puts a rule's header and query-parameter matches,
// sorted by name, into its HTTPRoute match.
func addMatches(m *porticov1alpha1.RequestMatch, match *gwapiv1.HTTPRouteMatch) {
	if m == nil {
		return
	}
	headers := slices.Clone(m.Headers)
	slices.SortFunc(headers, func(a, b porticov1alpha1.RuleHeaderMatch) int { return strings.Compare(a.Name, b.Name) })
	for _, h := range headers {
		exact, value := valueMatch(h.Exact, h.Prefix, h.Regex)
		kind := gwapiv1.HeaderMatchRegularExpression
		if exact {
			kind = gwapiv1.HeaderMatchExact
		}
		match.Headers = append(match.Headers, gwapiv1.HTTPHeaderMatch{Type: ptr.To(kind), Name: gwapiv1.HTTPHeaderName(h.Name), Value: value})
	}
	params := slices.Clone(m.QueryParams)
	slices.SortFunc(params, func(a, b porticov1alpha1.RuleQueryParamMatch) int { return strings.Compare(a.Name, b.Name) })
	for _, q := range params {
		exact, value := valueMatch(q.Exact, "", q.Regex)
		kind := gwapiv1.QueryParamMatchRegularExpression
		if exact {
			kind = gwapiv1.QueryParamMatchExact
		}
		match.QueryParams = append(match.QueryParams, gwapiv1.HTTPQueryParamMatch{Type: ptr.To(kind), Name: gwapiv1.HTTPHeaderName(q.Name), Value: value})
	}
}

// headerFilters are a rule's RequestHeaderModifier (headers and cookies it
// sets, headers it removes) and ResponseHeaderModifier, each only when it
// has something to do.
func headerFilters(rule *plan.Rule) []gwapiv1.HTTPRouteFilter {
	var out []gwapiv1.HTTPRouteFilter
	h := rule.Headers
	if len(rule.RequestHeaders)+len(h.RemoveRequest) > 0 {
		modifier := &gwapiv1.HTTPHeaderFilter{Set: headers(rule.RequestHeaders), Remove: slices.Clone(h.RemoveRequest)}
		out = append(out, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: modifier})
	}
	if len(h.SetResponse)+len(h.AddResponse)+len(h.RemoveResponse) > 0 {
		modifier := &gwapiv1.HTTPHeaderFilter{Set: headers(h.SetResponse), Add: headers(h.AddResponse), Remove: slices.Clone(h.RemoveResponse)}
		out = append(out, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: modifier})
	}
	return out
}

func headers(pairs [][2]string) []gwapiv1.HTTPHeader {
	var out []gwapiv1.HTTPHeader
	for _, h := range pairs {
		out = append(out, gwapiv1.HTTPHeader{Name: gwapiv1.HTTPHeaderName(h[0]), Value: h[1]})
	}
	return out
}
