package explain

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// apiRuleWorld is an APIRule's VirtualService as the apirule controller
// writes it: routes named by RouteName, owned by the APIRule.
func apiRuleWorld() (World, *gatewayv1alpha1.APIRule) {
	ar := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger", UID: types.UID("uid-ledger")}}
	ar.Spec.Rules = []gatewayv1alpha1.Rule{
		{Path: "/admin", Methods: []gatewayv1alpha1.HTTPMethod{"POST"}},
		{Path: "/"},
	}
	admin := httpRoute(gatewayv1alpha1.RouteName("team-a", "ledger", ar.Spec.Rules[0]), "/admin", "ledger.team-a.svc.cluster.local")
	admin.Match[0].Method = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: "POST"}}
	all := httpRoute(gatewayv1alpha1.RouteName("team-a", "ledger", ar.Spec.Rules[1]), "/", "ledger.team-a.svc.cluster.local")
	vs := virtualService("team-a", "ledger", 0, []string{"istio-system/public"}, []string{"ledger.a.example"}, admin, all)
	vs.OwnerReferences = []metav1.OwnerReference{{APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "APIRule", Name: "ledger",
		UID: ar.UID, Controller: new(true)}}
	w := ledgerWorld()
	w.VirtualServices = []*networkingv1.VirtualService{vs}
	w.APIRules = []*gatewayv1alpha1.APIRule{ar}
	return w, ar
}

func stepsOf(e Explanation, stage string) []string {
	var out []string
	for _, s := range e.Steps {
		if s.Stage == stage {
			out = append(out, s.Finding)
		}
	}
	return out
}

func TestExplainNamesTheRuleAndTheRoutesPassed(t *testing.T) {
	g := NewWithT(t)
	w, _ := apiRuleWorld()
	e, err := Explain(w, Query{Host: "ledger.a.example", Path: "/admin/x", Method: "GET"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stepsOf(e, "rule")).To(ConsistOf("rule 1 (path /, every method) of APIRule team-a/ledger"))
	g.Expect(stepsOf(e, "passed")).To(ConsistOf(And(
		ContainSubstring(`method "GET" does not match exactly "POST"`),
		ContainSubstring("rule 0 (path /admin, methods POST) of APIRule team-a/ledger"))))

	e, err = Explain(w, Query{Host: "ledger.a.example", Path: "/admin/x", Method: "POST"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stepsOf(e, "rule")).To(ConsistOf(ContainSubstring("rule 0")))
	g.Expect(stepsOf(e, "passed")).To(BeEmpty())
}

func TestExplainTrustsNoLookalikeOwner(t *testing.T) {
	cases := map[string]func(w *World){
		// Another APIRule of the same name (recreated): not the owner.
		"a different UID": func(w *World) { w.APIRules[0].UID = "uid-other" },
		// The caller may not read the APIRule: named, not shown.
		"an APIRule not visible": func(w *World) { w.APIRules = nil },
		// A VirtualService that only claims a route name.
		"no controller reference": func(w *World) { w.VirtualServices[0].OwnerReferences = nil },
		// The APIRule changed its rules since.
		"a rule since changed": func(w *World) { w.APIRules[0].Spec.Rules[1].Path = "/v2" },
	}
	want := map[string]string{
		"a different UID":         "APIRule team-a/ledger (not visible to you, or gone)",
		"an APIRule not visible":  "APIRule team-a/ledger (not visible to you, or gone)",
		"no controller reference": "VirtualService team-a/ledger is not an APIRule's",
		"a rule since changed":    "whose rules no longer include this route",
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			w, _ := apiRuleWorld()
			mutate(&w)
			e, err := Explain(w, Query{Host: "ledger.a.example", Path: "/", Method: "GET"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stepsOf(e, "rule")).To(ConsistOf(ContainSubstring(want[name])))
		})
	}
}

func TestRequestMismatchSaysTheFirstConditionThatFails(t *testing.T) {
	exact := func(v string) *networkingv1alpha3.StringMatch {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: v}}
	}
	cases := []struct {
		name  string
		match *networkingv1alpha3.HTTPMatchRequest
		probe Probe
		want  string
	}{
		{"all hold", &networkingv1alpha3.HTTPMatchRequest{Uri: exact("/a")}, Probe{Path: "/a", Method: "GET"}, ""},
		{"path", &networkingv1alpha3.HTTPMatchRequest{Uri: exact("/a")}, Probe{Path: "/b", Method: "GET"}, `path "/b" does not match exactly "/a"`},
		{"absent header", &networkingv1alpha3.HTTPMatchRequest{Headers: map[string]*networkingv1alpha3.StringMatch{"x-tenant": exact("a")}},
			Probe{Path: "/", Method: "GET"}, "header x-tenant is absent"},
		{"header of another value; names compare regardless of case", &networkingv1alpha3.HTTPMatchRequest{Headers: map[string]*networkingv1alpha3.StringMatch{"x-tenant": exact("a")}},
			Probe{Path: "/", Method: "GET", Headers: map[string]string{"X-Tenant": "b"}}, `header x-tenant "b" does not match exactly "a"`},
		{"excluded header", &networkingv1alpha3.HTTPMatchRequest{WithoutHeaders: map[string]*networkingv1alpha3.StringMatch{"x-debug": {}}},
			Probe{Path: "/", Method: "GET", Headers: map[string]string{"x-debug": "1"}}, "header x-debug is present and matches anything, which the route excludes"},
		{"query parameter", &networkingv1alpha3.HTTPMatchRequest{QueryParams: map[string]*networkingv1alpha3.StringMatch{"v": exact("2")}},
			Probe{Path: "/", Method: "GET", Query: map[string][]string{"v": {"1"}}}, `query parameter v "1" does not match exactly "2"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := requestMismatch(c.match, "istio-system/public", "team-a", c.probe)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
		})
	}
}
