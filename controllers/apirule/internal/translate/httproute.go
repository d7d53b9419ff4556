package translate

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Parent returns the Gateway API parent of an APIRule in HTTPRoute mode,
// with its defaults filled in (group, kind, the APIRule's namespace), or
// nil for an APIRule in Istio mode.
func Parent(r *gatewayv1alpha1.APIRule) *gatewayv1alpha1.ParentReference {
	if r.Spec.ParentRef == nil {
		return nil
	}
	p := *r.Spec.ParentRef
	if p.Group == "" {
		p.Group = gatewayv1alpha1.GatewayAPIGroup
	}
	if p.Kind == "" {
		p.Kind = "Gateway"
	}
	if p.Namespace == "" {
		p.Namespace = r.Namespace
	}
	return &p
}

// checkHTTPRoute refuses what an HTTPRoute cannot say as the APIRule means
// it; the API server's checks of the HTTPRoute (its CRD's) come after.
func checkHTTPRoute(r *gatewayv1alpha1.APIRule) error {
	if len(r.Spec.Rules) > gatewayv1alpha1.MaxHTTPRouteRules {
		return fmt.Errorf("an APIRule with parentRef has at most %d rules (one HTTPRoute's), not %d", gatewayv1alpha1.MaxHTTPRouteRules, len(r.Spec.Rules))
	}
	for _, rule := range r.Spec.Rules {
		if rule.Retries != nil {
			return fmt.Errorf("rule %s has retries, which need Istio mode: the HTTPRoute's retry field is in the Gateway API's experimental channel only", rule.Path)
		}
		// The Gateway API refuses these in Exact and PathPrefix matches.
		for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F", "#"} {
			if strings.Contains(rule.Path, bad) {
				return fmt.Errorf("path %s contains %q, which a Gateway API path match may not", rule.Path, bad)
			}
		}
		if strings.HasSuffix(strings.TrimSuffix(rule.Path, "/*"), "/.") || strings.HasSuffix(strings.TrimSuffix(rule.Path, "/*"), "/..") {
			return fmt.Errorf("path %s ends with a dot segment, which a Gateway API path match may not", rule.Path)
		}
	}
	if c := r.Spec.CORS; c != nil {
		for _, o := range c.AllowOrigins {
			// Istio's origins are exact; the Gateway API reads "*" inside
			// an origin as a wildcard: the same text would allow more.
			if o != "*" && strings.Contains(o, "*") {
				return fmt.Errorf("cors origin %s has a '*' that the Gateway API would read as a wildcard; list the origins", o)
			}
		}
	}
	return nil
}

// httpRoute is the HTTPRoute of an APIRule in HTTPRoute mode: one rule per
// APIRule rule (named by HTTPRouteRuleName, so a policy can address it),
// one match per method. The Gateway API ranks matches itself (exact paths,
// then the longest prefix, then methods, more header matches, more
// query-parameter matches) and breaks ties by rule order, which is
// orderedRules's, as the VirtualService's: both send a request to the same
// rule.
func httpRoute(r *gatewayv1alpha1.APIRule, parent *gatewayv1alpha1.ParentReference) *gatewayapiv1.HTTPRoute {
	route := &gatewayapiv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayapiv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: objectMeta(r, r.Namespace, r.Name),
	}
	ref := gatewayapiv1.ParentReference{
		Group:     ptr.To(gatewayapiv1.Group(parent.Group)),
		Kind:      ptr.To(gatewayapiv1.Kind(parent.Kind)),
		Namespace: ptr.To(gatewayapiv1.Namespace(parent.Namespace)),
		Name:      gatewayapiv1.ObjectName(parent.Name),
	}
	if parent.SectionName != "" {
		ref.SectionName = ptr.To(gatewayapiv1.SectionName(parent.SectionName))
	}
	route.Spec.ParentRefs = []gatewayapiv1.ParentReference{ref}
	for _, h := range r.Spec.Hosts {
		route.Spec.Hostnames = append(route.Spec.Hostnames, gatewayapiv1.Hostname(h))
	}
	cors := corsFilter(r.Spec.CORS)
	for _, rule := range orderedRules(r) {
		out := gatewayapiv1.HTTPRouteRule{
			Name:        ptr.To(gatewayapiv1.SectionName(gatewayv1alpha1.HTTPRouteRuleName(r.Namespace, r.Name, rule))),
			Matches:     pathMatches(rule),
			BackendRefs: backendRefs(r, rule),
		}
		timeout := rule.Timeout
		if timeout == nil {
			timeout = r.Spec.Timeout
		}
		if timeout != nil {
			out.Timeouts = &gatewayapiv1.HTTPRouteTimeouts{Request: ptr.To(gatewayapiv1.Duration(gatewayDuration(timeout.Duration)))}
		}
		if cors != nil {
			out.Filters = append(out.Filters, gatewayapiv1.HTTPRouteFilter{Type: gatewayapiv1.HTTPRouteFilterCORS, CORS: cors.DeepCopy()})
		}
		if rw := urlRewrite(rule); rw != nil {
			out.Filters = append(out.Filters, gatewayapiv1.HTTPRouteFilter{Type: gatewayapiv1.HTTPRouteFilterURLRewrite, URLRewrite: rw})
		}
		if set := requestHeaders(rule); len(set) > 0 {
			modifier := &gatewayapiv1.HTTPHeaderFilter{}
			for _, h := range set {
				modifier.Set = append(modifier.Set, gatewayapiv1.HTTPHeader{Name: gatewayapiv1.HTTPHeaderName(h[0]), Value: h[1]})
			}
			out.Filters = append(out.Filters, gatewayapiv1.HTTPRouteFilter{Type: gatewayapiv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: modifier})
		}
		route.Spec.Rules = append(route.Spec.Rules, out)
	}
	return route
}

// backendRefs are the Services of a rule: weighted backends with their
// percentages (the Gateway API's weights are relative; these add up to
// 100), a rule's only Service with the weight 1.
func backendRefs(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) []gatewayapiv1.HTTPBackendRef {
	var out []gatewayapiv1.HTTPBackendRef
	for _, d := range destinationsOf(r, rule) {
		weight := d.weight
		if len(rule.Backends) == 0 {
			weight = 1
		}
		ref := gatewayapiv1.HTTPBackendRef{BackendRef: gatewayapiv1.BackendRef{BackendObjectReference: gatewayapiv1.BackendObjectReference{
			Group: ptr.To(gatewayapiv1.Group("")), Kind: ptr.To(gatewayapiv1.Kind("Service")),
			Name: gatewayapiv1.ObjectName(d.service.Name), Port: ptr.To(d.service.Port),
		}, Weight: ptr.To(weight)}}
		if d.service.Namespace != r.Namespace {
			ref.Namespace = ptr.To(gatewayapiv1.Namespace(d.service.Namespace))
		}
		out = append(out, ref)
	}
	return out
}

// pathMatches are a rule's matches: its path (a template as a regular
// expression), once per method, each with the rule's header and
// query-parameter matches. A prefix
// rule "/orders/*" matches the path elements under /orders/ (and /orders
// itself, which the Gateway API's PathPrefix includes; the access policy,
// which allows /orders/* only, still refuses it at the workload).
func pathMatches(rule gatewayv1alpha1.Rule) []gatewayapiv1.HTTPRouteMatch {
	path := &gatewayapiv1.HTTPPathMatch{Type: ptr.To(gatewayapiv1.PathMatchExact), Value: ptr.To(rule.Path)}
	if isPrefix(rule.Path) {
		prefix := strings.TrimSuffix(rule.Path, "*")
		if prefix != "/" {
			prefix = strings.TrimSuffix(prefix, "/")
		}
		path = &gatewayapiv1.HTTPPathMatch{Type: ptr.To(gatewayapiv1.PathMatchPathPrefix), Value: ptr.To(prefix)}
	}
	if isTemplate(rule.Path) {
		// RE2, which Istio's Gateway API implementation reads as the
		// VirtualService does.
		path = &gatewayapiv1.HTTPPathMatch{Type: ptr.To(gatewayapiv1.PathMatchRegularExpression), Value: ptr.To(templateRegex(rule.Path))}
	}
	methods := methodStrings(rule.Methods)
	if len(methods) == 0 {
		match := gatewayapiv1.HTTPRouteMatch{Path: path}
		addGatewayMatches(rule, &match)
		return []gatewayapiv1.HTTPRouteMatch{match}
	}
	matches := make([]gatewayapiv1.HTTPRouteMatch, 0, len(methods))
	for _, m := range methods {
		match := gatewayapiv1.HTTPRouteMatch{Path: path.DeepCopy(), Method: ptr.To(gatewayapiv1.HTTPMethod(m))}
		addGatewayMatches(rule, &match)
		matches = append(matches, match)
	}
	return matches
}

// urlRewrite is a rule's rewrite as a URLRewrite filter: ReplaceFullPath,
// or ReplacePrefixMatch of the PathPrefix match ("/orders" by "/v2/orders",
// the Gateway API's prefixes having no final '/').
func urlRewrite(rule gatewayv1alpha1.Rule) *gatewayapiv1.HTTPURLRewriteFilter {
	rw := rule.Rewrite
	if rw == nil {
		return nil
	}
	if rw.Path != "" {
		return &gatewayapiv1.HTTPURLRewriteFilter{Path: &gatewayapiv1.HTTPPathModifier{
			Type: gatewayapiv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To(string(rw.Path)),
		}}
	}
	prefix := string(rw.Prefix)
	if prefix != "/" {
		prefix = strings.TrimSuffix(prefix, "/")
	}
	return &gatewayapiv1.HTTPURLRewriteFilter{Path: &gatewayapiv1.HTTPPathModifier{
		Type: gatewayapiv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To(prefix),
	}}
}

// gatewayDuration writes a duration the Gateway API's way: up to four
// units of h, m, s and ms ("1h30m", "2s500ms"). The APIRule's timeouts are
// whole milliseconds from 1ms to 1h, which always fit.
func gatewayDuration(d time.Duration) string {
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
func corsFilter(c *gatewayv1alpha1.CORSPolicy) *gatewayapiv1.HTTPCORSFilter {
	if c == nil {
		return nil
	}
	f := &gatewayapiv1.HTTPCORSFilter{AllowCredentials: c.AllowCredentials}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			// Any origin: the others add nothing, and the Gateway API
			// refuses "*" beside them.
			f.AllowOrigins = []gatewayapiv1.CORSOrigin{"*"}
			break
		}
		f.AllowOrigins = append(f.AllowOrigins, gatewayapiv1.CORSOrigin(o))
	}
	for _, m := range methodStrings(c.AllowMethods) {
		f.AllowMethods = append(f.AllowMethods, gatewayapiv1.HTTPMethodWithWildcard(m))
	}
	for _, h := range c.AllowHeaders {
		f.AllowHeaders = append(f.AllowHeaders, gatewayapiv1.HTTPHeaderName(h))
	}
	for _, h := range c.ExposeHeaders {
		f.ExposeHeaders = append(f.ExposeHeaders, gatewayapiv1.HTTPHeaderName(h))
	}
	// The API server's default, written out so the live route compares
	// equal.
	f.MaxAge = defaultCORSMaxAge
	if c.MaxAge != nil {
		f.MaxAge = int32(c.MaxAge.Duration / time.Second)
	}
	return f
}
