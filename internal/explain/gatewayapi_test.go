package explain

import (
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

const webGateway = "edge/web"

// apiGateway is the Gateway edge/web: an HTTP listener "http" on port 80
// for every host and namespace, an HTTP listener "internal" on 8081 for
// routes of edge only, and an HTTPS listener "shop" on 443 for *.shop.example.
func apiGateway() *gwapiv1.Gateway {
	all, same := gwapiv1.NamespacesFromAll, gwapiv1.NamespacesFromSame
	terminate := gwapiv1.TLSModeTerminate
	return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "web"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "istio",
		Listeners: []gwapiv1.Listener{
			{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType, AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &all}}},
			{Name: "internal", Port: 8081, Protocol: gwapiv1.HTTPProtocolType, AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &same}}},
			{Name: "shop", Port: 443, Protocol: gwapiv1.HTTPSProtocolType, Hostname: ptr.To(gwapiv1.Hostname("*.shop.example")),
				TLS:           &gwapiv1.ListenerTLSConfig{Mode: &terminate},
				AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &all}}},
		},
	}}
}

type routeOption func(*gwapiv1.HTTPRoute)

// gwRoute is an HTTPRoute of ns on edge/web for hosts, accepted by its
// implementation, created age seconds after a fixed instant.
func gwRoute(ns, name string, age int, hosts []string, rules ...gwapiv1.HTTPRouteRule) *gwapiv1.HTTPRoute {
	r := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))}}
	ref := gwapiv1.ParentReference{Namespace: ptr.To(gwapiv1.Namespace("edge")), Name: "web"}
	r.Spec.ParentRefs = []gwapiv1.ParentReference{ref}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwapiv1.Hostname(h))
	}
	r.Spec.Rules = rules
	r.Status.Parents = []gwapiv1.RouteParentStatus{{ParentRef: ref, ControllerName: "istio.io/gateway-controller", Conditions: []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "Route was valid", ObservedGeneration: 1},
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: 1},
	}}}
	return r
}

func with(r *gwapiv1.HTTPRoute, opts ...routeOption) *gwapiv1.HTTPRoute {
	for _, o := range opts {
		o(r)
	}
	return r
}

func notAccepted(reason string) routeOption {
	return func(r *gwapiv1.HTTPRoute) {
		r.Status.Parents[0].Conditions[0].Status, r.Status.Parents[0].Conditions[0].Reason = metav1.ConditionFalse, reason
	}
}

func pending() routeOption { return func(r *gwapiv1.HTTPRoute) { r.Status.Parents = nil } }

func onSection(name string) routeOption {
	return func(r *gwapiv1.HTTPRoute) {
		r.Spec.ParentRefs[0].SectionName = ptr.To(gwapiv1.SectionName(name))
		r.Status.Parents[0].ParentRef.SectionName = ptr.To(gwapiv1.SectionName(name))
	}
}

func match(kind gwapiv1.PathMatchType, path string, opts ...func(*gwapiv1.HTTPRouteMatch)) gwapiv1.HTTPRouteMatch {
	m := gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: &kind, Value: &path}}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func method(m string) func(*gwapiv1.HTTPRouteMatch) {
	return func(hm *gwapiv1.HTTPRouteMatch) { hm.Method = ptr.To(gwapiv1.HTTPMethod(m)) }
}

func header(name, value string) func(*gwapiv1.HTTPRouteMatch) {
	return func(hm *gwapiv1.HTTPRouteMatch) {
		hm.Headers = append(hm.Headers, gwapiv1.HTTPHeaderMatch{Name: gwapiv1.HTTPHeaderName(name), Value: value})
	}
}

func queryParam(name, value string) func(*gwapiv1.HTTPRouteMatch) {
	return func(hm *gwapiv1.HTTPRouteMatch) {
		hm.QueryParams = append(hm.QueryParams, gwapiv1.HTTPQueryParamMatch{Name: gwapiv1.HTTPHeaderName(name), Value: value})
	}
}

// toService is a named rule sending matches to Service svc (of the route's
// namespace) on 8080, with filters.
func toService(name, svc string, matches []gwapiv1.HTTPRouteMatch, filters ...gwapiv1.HTTPRouteFilter) gwapiv1.HTTPRouteRule {
	return gwapiv1.HTTPRouteRule{Name: ptr.To(gwapiv1.SectionName(name)), Matches: matches, Filters: filters,
		BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
			Name: gwapiv1.ObjectName(svc), Port: ptr.To(gwapiv1.PortNumber(8080))}}}}}
}

func anyOfMatches(m ...gwapiv1.HTTPRouteMatch) []gwapiv1.HTTPRouteMatch { return m }

// gatewayAPIWorld is the ledger of team-a in HTTPRoute mode on edge/web:
// /health exact, /orders prefix, /admin for the issuer's tokens, and
// team-b's catch-all route for another host.
func gatewayAPIWorld(routes ...*gwapiv1.HTTPRoute) World {
	return World{
		Gateway: webGateway, GatewayAPI: true,
		APIGateways: []*gwapiv1.Gateway{apiGateway()},
		HTTPRoutes:  routes,
		Policies:    teamA(),
		Workloads:   map[string]map[string]string{"team-a/ledger": ledger.Labels, "team-b/ledger": {"app": "grab"}},
	}
}

func ledgerRoute(opts ...routeOption) *gwapiv1.HTTPRoute {
	return with(gwRoute("team-a", "ledger", 10, []string{"ledger.a.example"},
		toService("health", "ledger", anyOfMatches(match(gwapiv1.PathMatchExact, "/health", method("GET")))),
		toService("orders", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/orders"))),
		toService("admin", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/admin"))),
	), opts...)
}

func TestExplainHTTPRouteMode(t *testing.T) {
	older := gwRoute("team-b", "grab", 5, []string{"ledger.a.example"},
		toService("grab", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/orders/42"))))
	wildcard := gwRoute("team-a", "any", 1, []string{"*.a.example"}, toService("any", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/"))))
	cases := []struct {
		name                string
		world               World
		query               Query
		want                Outcome
		route, says, reason string
	}{
		{"an exact path is routed to its rule", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/health", Method: "GET"},
			OutcomeRouted, "health", "listener http of Gateway edge/web: port 80, HTTP, hostname *", ""},
		{"a prefix covers whole path elements (the ledger's policies refuse it)", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/orders/7", Method: "GET"},
			Outcome403, "orders", `rule "health" of HTTPRoute team-a/ledger not taken: path "/orders/7" is not exactly "/health"`, ""},
		{"and not a longer element", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/ordersx", Method: "GET"},
			Outcome404, "", `path "/ordersx" is not under prefix "/orders"`, "no route of the gateway"},
		{"a method the exact match does not name", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/health", Method: "DELETE"},
			Outcome404, "", `method "DELETE" is not GET`, ""},
		{"the backends' policies still decide: a protected path without token", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/admin", Method: "GET"},
			Outcome403, "admin", "", ""},
		{"with the issuer's token", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/admin", Method: "GET", Token: tokenA},
			OutcomeRouted, "admin", "", ""},
		{"the longer prefix of another route wins across routes", gatewayAPIWorld(ledgerRoute(), older), Query{Host: "ledger.a.example", Path: "/orders/42", Method: "GET"},
			OutcomeRouted, "grab", "HTTPRoute team-b/grab", ""},
		{"an exact host's routes over a wildcard's", gatewayAPIWorld(ledgerRoute(), wildcard), Query{Host: "ledger.a.example", Path: "/other", Method: "GET"},
			Outcome404, "", "HTTPRoute team-a/any not considered: another route's hostname covers ledger.a.example more specifically", ""},
		{"a wildcard host", gatewayAPIWorld(ledgerRoute(), wildcard), Query{Host: "x.y.a.example", Path: "/other", Method: "GET"},
			Outcome403, "any", "", ""},
		{"a route its implementation did not accept is said and not used", gatewayAPIWorld(ledgerRoute(notAccepted("NotAllowedByListeners"))),
			Query{Host: "ledger.a.example", Path: "/health", Method: "GET"}, Outcome404, "", "HTTPRoute team-a/ledger is not accepted by its implementation, which does not serve it: NotAllowedByListeners", ""},
		{"a pending route is taken, and the outcome is unknown", gatewayAPIWorld(ledgerRoute(pending())), Query{Host: "ledger.a.example", Path: "/health", Method: "GET"},
			OutcomeUnknown, "health", "no answer yet from the Gateway's implementation", "pending"},
		{"a listener of the Gateway's namespace only does not admit team-a", gatewayAPIWorld(ledgerRoute(onSection("internal"))),
			Query{Host: "ledger.a.example", Path: "/health", Method: "GET", Port: 8081}, Outcome404, "", "admits routes of the Gateway's namespace only", ""},
		{"a route not attached is said with what its implementation reported", gatewayAPIWorld(ledgerRoute(onSection("internal"), notAccepted("NotAllowedByListeners"))),
			Query{Host: "ledger.a.example", Path: "/health", Method: "GET", Port: 8081}, Outcome404, "",
			"(allowedRoutes from Same); its implementation says: Accepted False, NotAllowedByListeners", ""},
		{"a route on a section is not on the other listeners", gatewayAPIWorld(ledgerRoute(onSection("internal"))),
			Query{Host: "ledger.a.example", Path: "/health", Method: "GET"}, Outcome404, "", "no parentRef names the Gateway and this listener", ""},
		{"a caller who may not read the Gateway: its routes naming it are taken as attached", func() World {
			w := gatewayAPIWorld(ledgerRoute(onSection("internal")))
			w.APIGateways = nil
			return w
		}(), Query{Host: "ledger.a.example", Path: "/health", Method: "GET"}, OutcomeRouted, "health", "its listeners are not checked", ""},
		{"a port no listener takes", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/health", Method: "GET", Port: 9090},
			OutcomeRefused, "", "no HTTP listener of Gateway edge/web on port 9090", "connection is refused"},
		{"a TLS host no listener covers", gatewayAPIWorld(ledgerRoute()), Query{Host: "ledger.a.example", Path: "/health", Method: "GET", TLS: true},
			OutcomeRefused, "", "", "TLS handshake fails"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			e, err := Explain(c.world, c.query)
			g.Expect(err).NotTo(HaveOccurred())
			out := stepsText(e)
			g.Expect(e.Outcome).To(Equal(c.want), out)
			g.Expect(e.Route).To(Equal(c.route), out)
			g.Expect(out).To(ContainSubstring(c.says))
			g.Expect(e.Reason).To(ContainSubstring(c.reason))
		})
	}
}

func stepsText(e Explanation) string {
	var b strings.Builder
	for _, s := range e.Steps {
		b.WriteString(s.Stage + " " + s.Finding + " " + strings.Join(s.Objects, ",") + "\n")
	}
	return b.String() + "verdict: " + string(e.Outcome) + " — " + e.Reason
}

func TestGatewayAPIMatchPrecedence(t *testing.T) {
	// Every match covers GET /p/x with x-v: 1 and ?q=1; the one of highest
	// precedence takes it, whatever the order of the rules.
	prefix, exact, regex := gwapiv1.PathMatchPathPrefix, gwapiv1.PathMatchExact, gwapiv1.PathMatchRegularExpression
	cases := []struct {
		name string
		a, b gwapiv1.HTTPRouteMatch
	}{
		{"exact over prefix", match(exact, "/p/x"), match(prefix, "/p")},
		{"the longer prefix", match(prefix, "/p/x"), match(prefix, "/p")},
		{"prefix over regex", match(prefix, "/p"), match(regex, "/p/.*")},
		{"a method over none", match(prefix, "/p", method("GET")), match(prefix, "/p")},
		{"more headers", match(prefix, "/p", header("x-v", "1")), match(prefix, "/p")},
		{"more query parameters", match(prefix, "/p", queryParam("q", "1")), match(prefix, "/p")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, order := range [][2]gwapiv1.HTTPRouteMatch{{c.a, c.b}, {c.b, c.a}} {
				g := NewWithT(t)
				first, second := "winner", "loser"
				if order[0].Path != c.a.Path || len(order[0].Headers) != len(c.a.Headers) || order[0].Method != c.a.Method || len(order[0].QueryParams) != len(c.a.QueryParams) {
					first, second = second, first
				}
				r := gwRoute("team-a", "ledger", 0, nil, toService(first, "ledger", anyOfMatches(order[0])), toService(second, "ledger", anyOfMatches(order[1])))
				e, err := Explain(gatewayAPIWorld(r), Query{Host: "ledger.a.example", Path: "/p/x", Method: "GET",
					Headers: map[string]string{"X-V": "1"}, Query: url.Values{"q": {"1"}}})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(e.Route).To(Equal("winner"), stepsText(e))
			}
		})
	}
	t.Run("ties go to the older route, then the first rule", func(t *testing.T) {
		g := NewWithT(t)
		younger := gwRoute("team-a", "a-younger", 9, nil, toService("young", "ledger", anyOfMatches(match(prefix, "/p"))))
		older := gwRoute("team-b", "z-older", 1, nil, toService("old", "ledger", anyOfMatches(match(prefix, "/p"))), toService("old-2", "ledger", anyOfMatches(match(prefix, "/p"))))
		e, err := Explain(gatewayAPIWorld(younger, older), Query{Host: "ledger.a.example", Path: "/p", Method: "GET"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([]string{e.HTTPRoute, e.Route}).To(Equal([]string{"team-b/z-older", "old"}))
	})
}

func TestGatewayAPIFiltersAndBackends(t *testing.T) {
	rewrite := gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwapiv1.HTTPURLRewriteFilter{
		Path: &gwapiv1.HTTPPathModifier{Type: gwapiv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/v2/orders")}}}
	full := gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwapiv1.HTTPURLRewriteFilter{
		Path: &gwapiv1.HTTPPathModifier{Type: gwapiv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To("/status")}}}
	redirect := gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{
		Scheme: ptr.To("https"), StatusCode: ptr.To(301)}}
	extension := gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{Kind: "Thing", Name: "x"}}
	split := toService("split", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/split")))
	split.BackendRefs[0].Weight = ptr.To[int32](90)
	split.BackendRefs = append(split.BackendRefs, gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{Weight: ptr.To[int32](10),
		BackendObjectReference: gwapiv1.BackendObjectReference{Name: "secret", Namespace: ptr.To(gwapiv1.Namespace("team-b")), Port: ptr.To(gwapiv1.PortNumber(8080))}}})
	drained := toService("drained", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/drained")))
	drained.BackendRefs[0].Weight = ptr.To[int32](0)
	r := gwRoute("team-a", "ledger", 0, []string{"ledger.a.example"},
		toService("rewrite", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/orders")), rewrite),
		toService("full", "ledger", anyOfMatches(match(gwapiv1.PathMatchExact, "/health")), full),
		toService("redirect", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/old")), redirect),
		toService("ext", "ledger", anyOfMatches(match(gwapiv1.PathMatchPathPrefix, "/ext")), extension),
		split, drained)
	cases := []struct {
		path, want, path2, says string
	}{
		{"/orders/42", "routed", "/v2/orders/42", "the backends receive path /v2/orders/42"},
		{"/health", "routed", "/status", ""},
		{"/old/page", "routed", "", "redirect 301 to https://ledger.a.example/old/page"},
		{"/split", "unknown", "/split", "secret.team-b.svc.cluster.local (as the route names it): unknown"},
		{"/drained", "500", "/drained", "no backendRef with a weight"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			g := NewWithT(t)
			open := gatewayAPIWorld(r)
			open.Policies = Policies{}
			e, err := Explain(open, Query{Host: "ledger.a.example", Path: c.path, Method: "GET"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(e.Outcome)).To(Equal(c.want), stepsText(e))
			g.Expect(e.Path).To(Equal(c.path2))
			g.Expect(stepsText(e)).To(ContainSubstring(c.says))
		})
	}
	t.Run("a filter it does not model is an error, never a guess", func(t *testing.T) {
		_, err := Explain(gatewayAPIWorld(r), Query{Host: "ledger.a.example", Path: "/ext", Method: "GET"})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("filter ExtensionRef is not modelled")))
	})
}

// The rule of the APIRule behind an HTTPRoute rule: the route's controller
// reference (by UID) and the name the apirule controller gives the rule.
func TestExplainNamesTheAPIRuleBehindAnHTTPRouteRule(t *testing.T) {
	g := NewWithT(t)
	ar := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger", UID: "uid-1"},
		Spec: gatewayv1alpha1.APIRuleSpec{Rules: []gatewayv1alpha1.Rule{{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}}}}}
	name := gatewayv1alpha1.HTTPRouteRuleName("team-a", "ledger", ar.Spec.Rules[0])
	r := gwRoute("team-a", "ledger", 0, []string{"ledger.a.example"}, toService(name, "ledger", anyOfMatches(match(gwapiv1.PathMatchExact, "/health"))))
	r.OwnerReferences = []metav1.OwnerReference{{APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "APIRule", Name: "ledger", UID: "uid-1", Controller: ptr.To(true)}}
	w := gatewayAPIWorld(r)
	w.APIRules = []*gatewayv1alpha1.APIRule{ar}
	e, err := Explain(w, Query{Host: "ledger.a.example", Path: "/health", Method: "GET"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stepsText(e)).To(ContainSubstring("rule 0 (path /health, methods GET) of APIRule team-a/ledger"))

	lookalike := ar.DeepCopy()
	lookalike.UID = "uid-2"
	w.APIRules = []*gatewayv1alpha1.APIRule{lookalike}
	e, err = Explain(w, Query{Host: "ledger.a.example", Path: "/health", Method: "GET"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stepsText(e)).To(ContainSubstring("APIRule team-a/ledger (not visible to you, or gone)"), "another APIRule of the same name is not the owner")
}
