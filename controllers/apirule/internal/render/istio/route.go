package istio

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/paths"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// VirtualService routes the plan's rules, in route order, through the
// plan's Istio Gateway: one HTTP route per rule to its Service ports, with
// its timeout, retries, rewrite, request headers and the CORS policy.
func VirtualService(p *plan.Plan) *networkingv1.VirtualService {
	vs := &networkingv1.VirtualService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "VirtualService"},
		ObjectMeta: p.ObjectMeta(p.APIRule.Namespace, p.APIRule.Name),
	}
	// Proto messages must not be copied: fill the object's spec in place.
	spec := &vs.Spec
	spec.Hosts, spec.Gateways = slices.Clone(p.Hosts), []string{p.Gateway}
	for _, rule := range p.Routes {
		match := &networkingv1alpha3.HTTPMatchRequest{Uri: uriMatch(rule.Path)}
		if len(rule.Methods) > 0 {
			match.Method = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{
				Regex: "^(" + strings.Join(rule.Methods, "|") + ")$",
			}}
		}
		addMatches(rule.Match, match)
		spec.Http = append(spec.Http, &networkingv1alpha3.HTTPRoute{
			Headers:    headersOperations(rule),
			Name:       rule.RouteName,
			Match:      []*networkingv1alpha3.HTTPMatchRequest{match},
			Route:      routeDestinations(rule.Destinations, p.ClusterDomain),
			Timeout:    duration(rule.Timeout),
			Retries:    retries(rule.Retries),
			Rewrite:    uriRewrite(rule),
			CorsPolicy: corsPolicy(p.CORS),
		})
	}
	return vs
}

func uriMatch(path string) *networkingv1alpha3.StringMatch {
	if paths.IsTemplate(path) {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: paths.Regex(path)}}
	}
	if paths.IsPrefix(path) {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: strings.TrimSuffix(path, "*")}}
	}
	return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: path}}
}

func duration(d *metav1.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(d.Duration)
}

// routeDestinations are the Service ports of a rule, with the weights of
// weighted backends (percentages adding up to 100, as Istio reads them);
// a rule's only Service has none and receives every request.
func routeDestinations(destinations []plan.Destination, clusterDomain string) []*networkingv1alpha3.HTTPRouteDestination {
	var out []*networkingv1alpha3.HTTPRouteDestination
	for _, d := range destinations {
		out = append(out, &networkingv1alpha3.HTTPRouteDestination{
			Destination: &networkingv1alpha3.Destination{
				Host: fmt.Sprintf("%s.%s.svc.%s", d.Service.Name, d.Service.Namespace, clusterDomain),
				Port: &networkingv1alpha3.PortSelector{Number: uint32(d.Service.Port)},
			},
			Weight: d.Weight,
		})
	}
	return out
}

// uriRewrite rewrites an exact path, or the matched prefix of a prefix
// rule (Istio replaces the prefix it matched, "/orders/"), or with a regex
// the whole path of a prefix rule, of which uri would replace only the
// prefix.
func uriRewrite(rule *plan.Rule) *networkingv1alpha3.HTTPRewrite {
	rw := rule.Rewrite
	switch {
	case rw == nil:
		return nil
	case rw.Path != "" && (paths.IsPrefix(rule.Path) || paths.IsTemplate(rule.Path)):
		return &networkingv1alpha3.HTTPRewrite{UriRegexRewrite: &networkingv1alpha3.RegexRewrite{Match: "^.*$", Rewrite: string(rw.Path)}}
	default:
		return &networkingv1alpha3.HTTPRewrite{Uri: string(rw.Path + rw.Prefix)}
	}
}

// headersOperations sets a rule's request headers and cookies, removes
// its removed request headers and changes its response headers. A rule
// with clientAddresses also sends X-Forwarded-For as the client's address
// alone, as the gateway determined it (plan.ForwardedFor), which the
// backend's sidecar reads as remote.ip.
func headersOperations(rule *plan.Rule) *networkingv1alpha3.Headers {
	set := rule.RequestHeaders
	if rule.Clients != nil {
		set = append(slices.Clone(set), [2]string{plan.ForwardedForHeader, plan.ForwardedFor})
	}
	h := rule.Headers
	if len(set) == 0 && h.Empty() {
		return nil
	}
	out := &networkingv1alpha3.Headers{}
	if len(set)+len(h.RemoveRequest) > 0 {
		out.Request = &networkingv1alpha3.Headers_HeaderOperations{Set: pairs(set), Remove: slices.Clone(h.RemoveRequest)}
	}
	if len(h.SetResponse)+len(h.AddResponse)+len(h.RemoveResponse) > 0 {
		out.Response = &networkingv1alpha3.Headers_HeaderOperations{
			Set: pairs(h.SetResponse), Add: pairs(h.AddResponse), Remove: slices.Clone(h.RemoveResponse),
		}
	}
	return out
}

// pairs are headers as a map, nil without any.
func pairs(headers [][2]string) map[string]string {
	if len(headers) == 0 {
		return nil
	}
	out := make(map[string]string, len(headers))
	for _, h := range headers {
		out[h[0]] = h[1]
	}
	return out
}

// retries is a rule's retry policy as Istio's: the retryOn conditions,
// sorted, then the status codes, which Istio turns into Envoy's
// retriable-status-codes.
func retries(p *porticov1alpha1.RetryPolicy) *networkingv1alpha3.HTTPRetry {
	if p == nil {
		return nil
	}
	var on []string
	for _, c := range p.RetryOn {
		on = append(on, string(c))
	}
	slices.Sort(on)
	on = slices.Compact(on)
	codes := slices.Compact(slices.Sorted(slices.Values(p.Codes)))
	for _, c := range codes {
		on = append(on, fmt.Sprint(c))
	}
	return &networkingv1alpha3.HTTPRetry{
		Attempts:      p.Attempts,
		PerTryTimeout: duration(p.PerTryTimeout),
		RetryOn:       strings.Join(on, ","),
	}
}

func corsPolicy(c *porticov1alpha1.CORSPolicy) *networkingv1alpha3.CorsPolicy {
	if c == nil {
		return nil
	}
	p := &networkingv1alpha3.CorsPolicy{
		AllowMethods:  plan.MethodStrings(c.AllowMethods),
		AllowHeaders:  slices.Clone(c.AllowHeaders),
		ExposeHeaders: slices.Clone(c.ExposeHeaders),
		MaxAge:        duration(c.MaxAge),
	}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			p.AllowOrigins = append(p.AllowOrigins, &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: ".*"}})
			continue
		}
		p.AllowOrigins = append(p.AllowOrigins, &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: o}})
	}
	if c.AllowCredentials != nil {
		p.AllowCredentials = wrapperspb.Bool(*c.AllowCredentials)
	}
	return p
}

// stringMatch is one value match as Istio's StringMatch.
func stringMatch(exact, prefix, regex string) *networkingv1alpha3.StringMatch {
	switch {
	case exact != "":
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: exact}}
	case prefix != "":
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: prefix}}
	default:
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: regex}}
	}
}

// addMatches puts a rule's header and query-parameter matches into
// its VirtualService match.
func addMatches(m *porticov1alpha1.RequestMatch, match *networkingv1alpha3.HTTPMatchRequest) {
	if m == nil {
		return
	}
	for _, h := range m.Headers {
		if match.Headers == nil {
			match.Headers = map[string]*networkingv1alpha3.StringMatch{}
		}
		match.Headers[h.Name] = stringMatch(h.Exact, h.Prefix, h.Regex)
	}
	for _, q := range m.QueryParams {
		if match.QueryParams == nil {
			match.QueryParams = map[string]*networkingv1alpha3.StringMatch{}
		}
		match.QueryParams[q.Name] = stringMatch(q.Exact, "", q.Regex)
	}
}
