package translate

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func headers(kv ...string) *porticov1alpha1.RequestMatch {
	m := &porticov1alpha1.RequestMatch{}
	for i := 0; i < len(kv); i += 2 {
		m.Headers = append(m.Headers, porticov1alpha1.RuleHeaderMatch{Name: kv[i], Exact: kv[i+1]})
	}
	return m
}

func get(path string) porticov1alpha1.Rule {
	return porticov1alpha1.Rule{Path: path, Methods: []porticov1alpha1.HTTPMethod{"GET"}}
}

func noAuth(rule porticov1alpha1.Rule) porticov1alpha1.Rule {
	rule.NoAuth = ptr.To(true)
	return rule
}

func guarded(rule porticov1alpha1.Rule) porticov1alpha1.Rule {
	rule.JWT = jwt("https://idp.example.com", nil, nil)
	return rule
}

func matched(rule porticov1alpha1.Rule, m *porticov1alpha1.RequestMatch) porticov1alpha1.Rule {
	rule.Match = m
	return rule
}

func onService(rule porticov1alpha1.Rule, name string) porticov1alpha1.Rule {
	rule.Service = &porticov1alpha1.ServiceReference{Name: name, Port: 8080}
	return rule
}

func TestMatchChecks(t *testing.T) {
	regex := func(re string) *porticov1alpha1.RequestMatch {
		return &porticov1alpha1.RequestMatch{Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-tenant", Regex: re}}}
	}
	tests := map[string]struct {
		rules   []porticov1alpha1.Rule
		wantErr string // "" when the APIRule translates
	}{
		"same path and method, different matches, same authentication": {
			rules: []porticov1alpha1.Rule{guarded(get("/orders")), guarded(matched(get("/orders"), headers("x-beta", "1")))},
		},
		"a noAuth header match on a jwt path": {
			rules:   []porticov1alpha1.Rule{guarded(get("/orders")), noAuth(matched(get("/orders"), headers("x-admin", "yes")))},
			wantErr: "a match selects a route, not access",
		},
		"a noAuth query match on a jwt path": {
			rules: []porticov1alpha1.Rule{guarded(get("/orders")), noAuth(matched(get("/orders"), &porticov1alpha1.RequestMatch{
				QueryParams: []porticov1alpha1.RuleQueryParamMatch{{Name: "debug", Exact: "1"}},
			}))},
			wantErr: "a match selects a route, not access",
		},
		"two matched rules with other authentication": {
			rules:   []porticov1alpha1.Rule{guarded(matched(get("/orders"), headers("x-a", "1"))), noAuth(matched(get("/orders"), headers("x-b", "1")))},
			wantErr: "can match the same request on the pods of service shop/orders",
		},
		"a matched noAuth prefix on the same prefix": {
			rules:   []porticov1alpha1.Rule{guarded(get("/orders/*")), noAuth(matched(get("/orders/*"), headers("x-admin", "yes")))},
			wantErr: "covers rule /orders/* (noAuth)",
		},
		"a matched noAuth prefix covering a jwt path": {
			rules:   []porticov1alpha1.Rule{guarded(get("/orders/admin")), noAuth(matched(get("/orders/*"), headers("x-admin", "yes")))},
			wantErr: "covers rule /orders/admin",
		},
		"on another Service selecting the same pods": {
			rules:   []porticov1alpha1.Rule{guarded(get("/orders")), onService(noAuth(matched(get("/orders"), headers("x-admin", "yes"))), "orders-admin")},
			wantErr: "on the pods of service shop/orders-admin",
		},
		"on other pods: a route to another workload": {
			rules: []porticov1alpha1.Rule{guarded(get("/orders")), onService(noAuth(matched(get("/orders"), headers("x-beta", "1"))), "reports")},
		},
		"other methods": {
			rules: []porticov1alpha1.Rule{guarded(get("/orders")), noAuth(matched(porticov1alpha1.Rule{Path: "/orders", Methods: []porticov1alpha1.HTTPMethod{"POST"}}, headers("x-a", "1")))},
		},
		"the same match twice": {
			rules:   []porticov1alpha1.Rule{guarded(matched(get("/orders"), headers("x-a", "1"))), guarded(matched(get("/orders"), headers("x-a", "1")))},
			wantErr: "two rules have the path /orders and a method in common, and the same match",
		},
		"an invalid regex": {
			rules:   []porticov1alpha1.Rule{noAuth(matched(get("/orders"), regex("team-(")))},
			wantErr: "is not a valid RE2 regular expression",
		},
		"a back-reference": {
			rules:   []porticov1alpha1.Rule{noAuth(matched(get("/orders"), regex(`(a)\1`)))},
			wantErr: "is not a valid RE2 regular expression",
		},
		"a regex too large for Envoy": {
			rules:   []porticov1alpha1.Rule{noAuth(matched(get("/orders"), regex("[a-z]{600}[0-9]{600}")))},
			wantErr: "instructions, more than 1000",
		},
		"an angle-bracket named group": {
			rules:   []porticov1alpha1.Rule{noAuth(matched(get("/orders"), regex("(?<team>[a-z]+)")))},
			wantErr: "(?<name>...)",
		},
		"a query parameter by prefix": {
			rules: []porticov1alpha1.Rule{noAuth(matched(get("/orders"), &porticov1alpha1.RequestMatch{
				QueryParams: []porticov1alpha1.RuleQueryParamMatch{{Name: "v", Prefix: "2"}},
			}))},
			wantErr: "cannot be matched by prefix",
		},
		"a header Istio ignores": {
			rules:   []porticov1alpha1.Rule{noAuth(matched(get("/orders"), headers("authority", "a")))},
			wantErr: "other than uri, scheme, method, authority, host",
		},
		"a header with two kinds": {
			rules: []porticov1alpha1.Rule{noAuth(matched(get("/orders"), &porticov1alpha1.RequestMatch{
				Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-a", Exact: "1", Prefix: "1"}},
			}))},
			wantErr: "needs exactly one of exact, prefix or regex",
		},
		"a control character in a value": {
			rules:   []porticov1alpha1.Rule{noAuth(matched(get("/orders"), headers("x-a", "1\n")))},
			wantErr: "printable ASCII",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(withRules(tc.rules...))
			for _, parent := range []*porticov1alpha1.ParentReference{nil, {Namespace: "infra", Name: "public"}} {
				_, err := Translate(Input{APIRule: r, Selectors: selectors, Parent: parent})
				if tc.wantErr == "" {
					g.Expect(err).NotTo(HaveOccurred())
					continue
				}
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			}
		})
	}
}

// The access policy never carries a rule's matches: the client chooses
// its headers, so requiring one would guard nothing.
func TestMatchesAddNoAccessCondition(t *testing.T) {
	g := NewWithT(t)
	out, err := Translate(Input{APIRule: newAPIRule(withRules(noAuth(matched(get("/orders"), headers("x-beta", "1"))))), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	rules := out.Workloads[0].AuthorizationPolicy.Spec.Rules
	g.Expect(rules).To(HaveLen(1))
	g.Expect(rules[0].When).To(BeEmpty())
	g.Expect(rules[0].To[0].Operation.Paths).To(Equal([]string{"/orders"}))
}

// request is what the routing simulations below see of a request.
type request struct {
	path, method string
	headers      map[string]string
	query        map[string]string
}

func stringMatches(m *networkingv1alpha3.StringMatch, value string, present bool) bool {
	if !present {
		return false
	}
	switch {
	case m.GetExact() != "":
		return value == m.GetExact()
	case m.GetPrefix() != "":
		return strings.HasPrefix(value, m.GetPrefix())
	default:
		return regexp.MustCompile("^(?:" + m.GetRegex() + ")$").MatchString(value)
	}
}

// virtualServiceRoute is the name of the route Istio takes: the first
// whose match the request meets.
func virtualServiceRoute(vs []*networkingv1alpha3.HTTPRoute, req request) string {
	for _, route := range vs {
		m := route.Match[0]
		if !stringMatches(m.Uri, req.path, true) || (m.Method != nil && !stringMatches(m.Method, req.method, true)) {
			continue
		}
		ok := true
		for name, sm := range m.Headers {
			v, present := req.headers[name]
			ok = ok && stringMatches(sm, v, present)
		}
		for name, sm := range m.QueryParams {
			v, present := req.query[name]
			ok = ok && stringMatches(sm, v, present)
		}
		if ok {
			return route.Name
		}
	}
	return ""
}

func gatewayValueMatches(exact bool, want, value string, present bool) bool {
	if !present {
		return false
	}
	if exact {
		return value == want
	}
	return regexp.MustCompile("^(?:" + want + ")$").MatchString(value)
}

func httpRouteMatches(m gwapiv1.HTTPRouteMatch, req request) bool {
	p := *m.Path.Value
	if *m.Path.Type == gwapiv1.PathMatchExact && req.path != p {
		return false
	}
	if *m.Path.Type == gwapiv1.PathMatchPathPrefix && req.path != p && !strings.HasPrefix(req.path, strings.TrimSuffix(p, "/")+"/") {
		return false
	}
	if m.Method != nil && string(*m.Method) != req.method {
		return false
	}
	for _, h := range m.Headers {
		v, present := req.headers[string(h.Name)]
		if !gatewayValueMatches(*h.Type == gwapiv1.HeaderMatchExact, h.Value, v, present) {
			return false
		}
	}
	for _, q := range m.QueryParams {
		v, present := req.query[string(q.Name)]
		if !gatewayValueMatches(*q.Type == gwapiv1.QueryParamMatchExact, q.Value, v, present) {
			return false
		}
	}
	return true
}

// httpRouteRule is the name of the rule the Gateway API's precedence
// picks: exact path, longest prefix, method, most header matches, most
// query-parameter matches, then the first rule.
func httpRouteRule(route *gwapiv1.HTTPRoute, req request) string {
	type candidate struct {
		rank []int
		name string
	}
	var best *candidate
	for i, rule := range route.Spec.Rules {
		for _, m := range rule.Matches {
			if !httpRouteMatches(m, req) {
				continue
			}
			exact := 0
			if *m.Path.Type == gwapiv1.PathMatchExact {
				exact = 1
			}
			method := 0
			if m.Method != nil {
				method = 1
			}
			c := candidate{rank: []int{exact, len(*m.Path.Value), method, len(m.Headers), len(m.QueryParams), -i}, name: string(*rule.Name)}
			if best == nil || slices.Compare(c.rank, best.rank) > 0 {
				best = &c
			}
		}
	}
	if best == nil {
		return ""
	}
	return best.name
}

// Both outputs send a request to the same rule: the VirtualService's
// first matching route and the Gateway API's precedence agree.
func TestBothOutputsRouteARequestToTheSameRule(t *testing.T) {
	all := porticov1alpha1.Rule{Path: "/orders"}
	rules := []porticov1alpha1.Rule{
		guarded(get("/orders")),
		guarded(matched(get("/orders"), headers("x-beta", "1"))),
		guarded(matched(get("/orders"), headers("x-beta", "1", "x-tier", "gold"))),
		guarded(matched(all, headers("x-beta", "1", "x-tier", "gold", "x-more", "1"))),
		guarded(matched(get("/orders"), &porticov1alpha1.RequestMatch{
			Headers:     []porticov1alpha1.RuleHeaderMatch{{Name: "x-beta", Prefix: "1"}},
			QueryParams: []porticov1alpha1.RuleQueryParamMatch{{Name: "v", Regex: "2|3"}},
		})),
		guarded(porticov1alpha1.Rule{Path: "/orders", Methods: []porticov1alpha1.HTTPMethod{"POST", "DELETE"}}),
		noAuth(porticov1alpha1.Rule{Path: "/orders/*"}),
		noAuth(matched(porticov1alpha1.Rule{Path: "/orders/*"}, headers("x-beta", "1"))),
		noAuth(matched(porticov1alpha1.Rule{Path: "/orders/export/*"}, &porticov1alpha1.RequestMatch{
			QueryParams: []porticov1alpha1.RuleQueryParamMatch{{Name: "format", Exact: "csv"}},
		})),
		guarded(matched(get("/orders"), headers("x-gamma", "1"))),
	}
	r := newAPIRule(withRules(rules...))
	// A true tie (rules 1 and 9: GET, one header each) goes to the rule
	// whose route name sorts first, in both outputs.
	tie := 1
	if porticov1alpha1.RouteName(r.Namespace, r.Name, rules[9]) < porticov1alpha1.RouteName(r.Namespace, r.Name, rules[1]) {
		tie = 9
	}
	vs := must(Translate(Input{APIRule: r, Selectors: selectors})).VirtualService
	onGateway := r.DeepCopy()
	onGateway.Spec.Gateway, onGateway.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "public"}
	route := must(Translate(Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})).HTTPRoute

	for name, tc := range map[string]struct {
		req  request
		want int // index in rules
	}{
		"no header":                               {req: request{path: "/orders", method: "GET"}, want: 0},
		"one header":                              {req: request{path: "/orders", method: "GET", headers: map[string]string{"x-beta": "1"}}, want: 1},
		"two headers beat one":                    {req: request{path: "/orders", method: "GET", headers: map[string]string{"x-beta": "1", "x-tier": "gold"}}, want: 2},
		"a method beats more headers":             {req: request{path: "/orders", method: "GET", headers: map[string]string{"x-beta": "1", "x-tier": "gold", "x-more": "1"}}, want: 2},
		"a method beats more headers again":       {req: request{path: "/orders", method: "POST", headers: map[string]string{"x-beta": "1", "x-tier": "gold", "x-more": "1"}}, want: 5},
		"more headers without a method":           {req: request{path: "/orders", method: "PUT", headers: map[string]string{"x-beta": "1", "x-tier": "gold", "x-more": "1"}}, want: 3},
		"no rule":                                 {req: request{path: "/other", method: "GET", headers: map[string]string{"x-beta": "1"}}, want: -1},
		"a query parameter breaks a tie":          {req: request{path: "/orders", method: "GET", headers: map[string]string{"x-beta": "10"}, query: map[string]string{"v": "2"}}, want: 4},
		"a query parameter beats an exact header": {req: request{path: "/orders", method: "GET", headers: map[string]string{"x-beta": "1"}, query: map[string]string{"v": "3"}}, want: 4},
		"a tie of one header each":                {req: request{path: "/orders", method: "GET", headers: map[string]string{"x-beta": "1", "x-gamma": "1"}}, want: tie},
		"other methods":                           {req: request{path: "/orders", method: "DELETE", headers: map[string]string{"x-beta": "1"}}, want: 5},
		"a prefix with a header":                  {req: request{path: "/orders/42", method: "GET", headers: map[string]string{"x-beta": "1"}}, want: 7},
		"a prefix without":                        {req: request{path: "/orders/42", method: "GET"}, want: 6},
		"a longer prefix beats more headers":      {req: request{path: "/orders/export/all", method: "GET", headers: map[string]string{"x-beta": "1"}, query: map[string]string{"format": "csv"}}, want: 8},
		"a longer prefix not matched":             {req: request{path: "/orders/export/all", method: "GET", headers: map[string]string{"x-beta": "1"}}, want: 7},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			if tc.want < 0 {
				g.Expect(virtualServiceRoute(vs.Spec.Http, tc.req)).To(BeEmpty())
				g.Expect(httpRouteRule(route, tc.req)).To(BeEmpty())
				return
			}
			g.Expect(virtualServiceRoute(vs.Spec.Http, tc.req)).To(Equal(porticov1alpha1.RouteName(r.Namespace, r.Name, rules[tc.want])), "VirtualService")
			g.Expect(httpRouteRule(route, tc.req)).To(Equal(porticov1alpha1.HTTPRouteRuleName(r.Namespace, r.Name, rules[tc.want])), "HTTPRoute")
		})
	}
}
