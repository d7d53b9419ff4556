package explain

import (
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// virtualService builds a VirtualService created age seconds after epoch.
func virtualService(ns, name string, age int, gateways, hosts []string, routes ...*networkingv1alpha3.HTTPRoute) *networkingv1.VirtualService {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second)),
	}}
	vs.Spec.Gateways, vs.Spec.Hosts, vs.Spec.Http = gateways, hosts, routes
	return vs
}

func httpRoute(name, prefix, dest string, match ...func(*networkingv1alpha3.HTTPMatchRequest)) *networkingv1alpha3.HTTPRoute {
	m := &networkingv1alpha3.HTTPMatchRequest{}
	if prefix != "" {
		m.Uri = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: prefix}}
	}
	for _, f := range match {
		f(m)
	}
	return &networkingv1alpha3.HTTPRoute{Name: name, Match: []*networkingv1alpha3.HTTPMatchRequest{m},
		Route: []*networkingv1alpha3.HTTPRouteDestination{{Destination: &networkingv1alpha3.Destination{Host: dest, Port: &networkingv1alpha3.PortSelector{Number: 8080}}}}}
}

func methodRegex(re string) func(*networkingv1alpha3.HTTPMatchRequest) {
	return func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.Method = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: re}}
	}
}

func TestRoute(t *testing.T) {
	const public = "istio-system/public"
	gw := []string{public}
	a := virtualService("team-a", "a", 1, gw, []string{"a.example.com"}, httpRoute("a-admin", "/admin", "ledger.team-a.svc.cluster.local"))
	wildcardB := virtualService("team-b", "wild", 2, gw, []string{"*.example.com"}, httpRoute("b-all", "/", "shop.team-b.svc.cluster.local"))
	sameHostB := virtualService("team-b", "same", 3, gw, []string{"a.example.com"}, httpRoute("b-all", "/", "shop"))
	olderCatchAll := virtualService("team-b", "older", 0, gw, []string{"a.example.com"}, httpRoute("b-all", "/", "shop"))
	cases := []struct {
		name                        string
		vss                         []*networkingv1.VirtualService
		gateway, host, path, method string
		wantRoute                   string // "" for no route
		wantNamespace               string
	}{
		{"an exact host routes by prefix", []*networkingv1.VirtualService{a}, public, "a.example.com", "/admin/users", "GET", "a-admin", "team-a"},
		{"a path outside every route is not routed", []*networkingv1.VirtualService{a}, public, "a.example.com", "/other", "GET", "", ""},
		{"another gateway does not route it", []*networkingv1.VirtualService{a}, "istio-system/internal", "a.example.com", "/admin", "GET", "", ""},
		{"hosts match case-insensitively", []*networkingv1.VirtualService{a}, public, "A.Example.com", "/admin", "GET", "a-admin", "team-a"},
		{"a wildcard covers a host without an exact VirtualService", []*networkingv1.VirtualService{a, wildcardB}, public, "c.example.com", "/x", "GET", "b-all", "team-b"},
		{"an exact host wins over the wildcard", []*networkingv1.VirtualService{a, wildcardB}, public, "a.example.com", "/other", "GET", "", ""},
		{"VirtualServices of one host merge: a later one serves what the first does not route", []*networkingv1.VirtualService{sameHostB, a}, public, "a.example.com", "/other", "GET", "b-all", "team-b"},
		{"merged routes keep creation order: the older catch-all shadows the owner", []*networkingv1.VirtualService{a, olderCatchAll}, public, "a.example.com", "/admin", "GET", "b-all", "team-b"},
		{"a gateway name without namespace is the VirtualService's namespace",
			[]*networkingv1.VirtualService{virtualService("istio-system", "own", 0, []string{"public"}, []string{"x.example.com"}, httpRoute("r", "/", "svc.team-a.svc.cluster.local"))},
			public, "x.example.com", "/", "GET", "r", "team-a"},
		{"the mesh gateway is not an ingress gateway",
			[]*networkingv1.VirtualService{virtualService("team-a", "mesh", 0, []string{"mesh"}, []string{"x.example.com"}, httpRoute("r", "/", "svc"))},
			public, "x.example.com", "/", "GET", "", ""},
		{"a method regex must match the whole method",
			[]*networkingv1.VirtualService{virtualService("team-a", "m", 0, gw, []string{"x.example.com"}, httpRoute("r", "/", "svc", methodRegex("GET|HEAD")))},
			public, "x.example.com", "/", "GETX", "", ""},
		{"a matching method regex routes",
			[]*networkingv1.VirtualService{virtualService("team-a", "m", 0, gw, []string{"x.example.com"}, httpRoute("r", "/", "svc", methodRegex("^(GET|HEAD)$")))},
			public, "x.example.com", "/", "HEAD", "r", "team-a"},
		{"a route without match takes everything",
			[]*networkingv1.VirtualService{virtualService("team-b", "all", 0, gw, []string{"x.example.com"}, &networkingv1alpha3.HTTPRoute{Name: "r",
				Route: []*networkingv1alpha3.HTTPRouteDestination{{Destination: &networkingv1alpha3.Destination{Host: "billing.team-a.svc.cluster.local"}}}})},
			public, "x.example.com", "/admin", "DELETE", "r", "team-a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Route(tc.vss, tc.gateway, tc.host, tc.path, tc.method)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantRoute == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Route).To(Equal(tc.wantRoute))
			g.Expect(got.Destinations).To(HaveLen(1))
			g.Expect(got.Destinations[0].Namespace).To(Equal(tc.wantNamespace))
		})
	}
}

func TestRouteDestinations(t *testing.T) {
	for host, want := range map[string][2]string{
		"ledger":                           {"ledger", "team-b"},
		"ledger.team-a.svc.cluster.local":  {"ledger", "team-a"},
		"api.partner.example":              {"", ""},
		"ledger.team-a":                    {"", ""},
		"ledger.team-a.svc.cluster.local.": {"", ""},
	} {
		t.Run(host, func(t *testing.T) {
			g := NewWithT(t)
			vs := virtualService("team-b", "d", 0, []string{"istio-system/public"}, []string{"d.example.com"}, httpRoute("r", "/", host))
			got, err := Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "d.example.com", "/", "GET")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Destinations).To(ConsistOf(Destination{Host: host, Service: want[0], Namespace: want[1], Port: 8080}))
		})
	}
}

func TestRouteRefusesWhatItDoesNotModel(t *testing.T) {
	g := NewWithT(t)
	headers := httpRoute("r", "/", "svc", func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.Headers = map[string]*networkingv1alpha3.StringMatch{"x-team": {MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: "a"}}}
	})
	delegate := &networkingv1alpha3.HTTPRoute{Name: "d", Delegate: &networkingv1alpha3.Delegate{Name: "x", Namespace: "team-b"}}
	for _, route := range []*networkingv1alpha3.HTTPRoute{headers, delegate} {
		vs := virtualService("team-b", "u", 0, []string{"istio-system/public"}, []string{"u.example.com"}, route)
		_, err := Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "u.example.com", "/", "GET")
		g.Expect(err).To(MatchError(ContainSubstring("team-b/u")))
	}
}

func TestRouteRewrites(t *testing.T) {
	prefix := httpRoute("prefix", "/public/", "svc")
	prefix.Rewrite = &networkingv1alpha3.HTTPRewrite{Uri: "/admin/"}
	exact := httpRoute("exact", "", "svc", func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.Uri = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: "/status"}}
	})
	exact.Rewrite = &networkingv1alpha3.HTTPRewrite{Uri: "/health"}
	whole := httpRoute("whole", "/old/", "svc")
	whole.Rewrite = &networkingv1alpha3.HTTPRewrite{UriRegexRewrite: &networkingv1alpha3.RegexRewrite{Match: "^.*$", Rewrite: "/$new"}}
	plain := httpRoute("plain", "/", "svc")
	vs := virtualService("team-a", "r", 0, []string{"istio-system/public"}, []string{"r.example.com"}, prefix, exact, whole, plain)
	for path, want := range map[string]string{
		"/public/keys": "/admin/keys", "/status": "/health", "/old/a/b": "/$new", "/other": "/other",
	} {
		got, err := Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "r.example.com", path, "GET")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(got.Path).To(Equal(want), path)
	}
	authority := httpRoute("authority", "/", "svc")
	authority.Rewrite = &networkingv1alpha3.HTTPRewrite{Authority: "other.example.com"}
	vs = virtualService("team-a", "a", 0, []string{"istio-system/public"}, []string{"a.example.com"}, authority)
	_, err := Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "a.example.com", "/", "GET")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("not modelled")))
}

// TestRouteLeavesDrainedDestinationsOut: a destination of weight 0 in a
// split receives nothing (Istio leaves it out of Envoy's weighted
// clusters); a lone destination without weight receives everything.
func TestRouteLeavesDrainedDestinationsOut(t *testing.T) {
	g := NewWithT(t)
	dest := func(host string, weight int32) *networkingv1alpha3.HTTPRouteDestination {
		return &networkingv1alpha3.HTTPRouteDestination{Weight: weight,
			Destination: &networkingv1alpha3.Destination{Host: host, Port: &networkingv1alpha3.PortSelector{Number: 8080}},
			Headers:     &networkingv1alpha3.Headers{Request: &networkingv1alpha3.Headers_HeaderOperations{Set: map[string]string{"x-via": host}}}}
	}
	split := httpRoute("split", "/", "unused")
	split.Route = []*networkingv1alpha3.HTTPRouteDestination{dest("live.shop.svc.cluster.local", 100), dest("drained.analytics.svc.cluster.local", 0)}
	lone := httpRoute("lone", "/lone", "unused")
	lone.Route = []*networkingv1alpha3.HTTPRouteDestination{dest("only.shop.svc.cluster.local", 0)}
	vs := virtualService("shop", "split", 1, []string{"istio-system/public"}, []string{"a.example.com"}, lone, split)

	r, err := Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "a.example.com", "/x", "GET")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Destinations).To(ConsistOf(HaveField("Namespace", "shop")))
	g.Expect(r.RequestHeaders).To(Equal(map[string]string{"x-via": "live.shop.svc.cluster.local"}))

	r, err = Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "a.example.com", "/lone", "GET")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Destinations).To(ConsistOf(HaveField("Service", "only")))
}

// TestRouteProbeMatchesHeadersAndQueryParameters: header names compare
// regardless of case, an empty match asks for presence, withoutHeaders
// inverts, a query parameter's first value is matched; Route refuses
// these matches since it has no headers to match.
func TestRouteProbeMatchesHeadersAndQueryParameters(t *testing.T) {
	exact := func(v string) *networkingv1alpha3.StringMatch {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: v}}
	}
	regex := func(v string) *networkingv1alpha3.StringMatch {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: v}}
	}
	admin := httpRoute("admin", "/", "admin", func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.Headers = map[string]*networkingv1alpha3.StringMatch{"x-admin": exact("yes"), "x-beta": regex("1|2")}
	})
	present := httpRoute("present", "/", "present", func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.Headers = map[string]*networkingv1alpha3.StringMatch{"x-admin": {}}
	})
	debug := httpRoute("debug", "/", "debug", func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.QueryParams = map[string]*networkingv1alpha3.StringMatch{"debug": exact("1")}
	})
	notBeta := httpRoute("not-beta", "/", "not-beta", func(m *networkingv1alpha3.HTTPMatchRequest) {
		m.WithoutHeaders = map[string]*networkingv1alpha3.StringMatch{"x-beta": {}}
	})
	vs := virtualService("shop", "h", 0, []string{"istio-system/public"}, []string{"h.example.com"}, admin, present, debug, notBeta)
	cases := []struct {
		name    string
		headers map[string]string
		query   url.Values
		want    string // "" for no route
	}{
		{"both headers match, names regardless of case", map[string]string{"X-Admin": "yes", "x-beta": "2"}, nil, "admin"},
		{"a regex matches the whole value", map[string]string{"x-admin": "yes", "x-beta": "12"}, nil, "present"},
		{"an empty match asks for presence", map[string]string{"x-admin": ""}, nil, "present"},
		{"the first value of a parameter is matched", map[string]string{"x-beta": "1"}, url.Values{"debug": {"1", "0"}}, "debug"},
		{"a later value is not", map[string]string{"x-beta": "1"}, url.Values{"debug": {"0", "1"}}, ""},
		{"withoutHeaders matches when the header is absent", nil, nil, "not-beta"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := RouteProbe([]*networkingv1.VirtualService{vs}, "istio-system/public", Probe{Host: "h.example.com", Path: "/", Method: "GET", Headers: c.headers, Query: c.query})
			g.Expect(err).NotTo(HaveOccurred())
			if c.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Route).To(Equal(c.want))
		})
	}
	_, err := Route([]*networkingv1.VirtualService{vs}, "istio-system/public", "h.example.com", "/", "GET")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("RouteProbe")))
}
