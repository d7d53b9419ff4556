package translate

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func split(backends ...porticov1alpha1.WeightedBackend) []porticov1alpha1.WeightedBackend {
	return backends
}

func weighted(name, namespace string, weight int32) porticov1alpha1.WeightedBackend {
	return porticov1alpha1.WeightedBackend{Service: porticov1alpha1.ServiceReference{Name: name, Namespace: namespace, Port: 8080}, Weight: weight}
}

// A rule with backends serves every one of them: each check that compares
// the workloads of two rules must see all of a split's backends, and the
// controller's own checks must refuse what the API server refuses.
func TestTranslateWeightedBackendsRefusals(t *testing.T) {
	canary := split(weighted("orders", "", 90), weighted("reports", "", 10))
	for name, tc := range map[string]struct {
		rules   []porticov1alpha1.Rule
		wantErr string
	}{
		"a canary split": {rules: []porticov1alpha1.Rule{
			{Path: "/orders/*", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 90), weighted("orders-v2", "", 10))},
		}},
		"a noAuth prefix split onto pods a JWT path of another Service guards": {
			rules: []porticov1alpha1.Rule{
				{Path: "/api/*", NoAuth: ptr.To(true), Backends: canary},
				{Path: "/api/admin", JWT: jwt("https://idp.example.com", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
			},
			wantErr: "rule /api/* (noAuth) covers rule /api/admin (jwt issuer https://idp.example.com) on the pods of service shop/reports",
		},
		"a noAuth prefix over a JWT path split onto its pods": {
			rules: []porticov1alpha1.Rule{
				{Path: "/api/*", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
				{Path: "/api/admin", JWT: jwt("https://idp.example.com", nil, nil), Backends: canary},
			},
			wantErr: "covers rule /api/admin",
		},
		"the same prefix over a JWT path of pods the split does not reach": {rules: []porticov1alpha1.Rule{
			{Path: "/api/*", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 50), weighted("orders-v2", "", 50))},
			{Path: "/api/admin", JWT: jwt("https://idp.example.com", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
		}},
		"a weight-0 backend counts too": {
			rules: []porticov1alpha1.Rule{
				{Path: "/api/*", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 100), weighted("reports", "", 0))},
				{Path: "/api/admin", JWT: jwt("https://idp.example.com", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
			},
			wantErr: "on the pods of service shop/reports",
		},
		"a noAuth rewrite from a split onto a guarded path": {
			rules: []porticov1alpha1.Rule{
				{Path: "/public/*", NoAuth: ptr.To(true), Backends: canary, Rewrite: &porticov1alpha1.Rewrite{Prefix: "/admin/"}},
				{Path: "/admin/*", JWT: jwt("https://idp.example.com", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
			},
			wantErr: "rewrites to /admin/*",
		},
		"weights adding up to 99": {
			rules:   []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 90), weighted("reports", "", 9))}},
			wantErr: "add up to 99; they are percentages of its requests and must add up to 100",
		},
		"every weight 0": {
			rules:   []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 0), weighted("reports", "", 0))}},
			wantErr: "add up to 0",
		},
		"a negative weight": {
			rules:   []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 110), weighted("reports", "", -10))}},
			wantErr: "weights are percentages from 0 to 100",
		},
		"one backend": {
			rules:   []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 100))}},
			wantErr: "has 1 backends; a rule splits its requests between 2 and 8",
		},
		"a backend twice, once with the APIRule's namespace": {
			rules:   []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 50), weighted("orders", "shop", 50))}},
			wantErr: "lists backend shop/orders port 8080 twice",
		},
		"service and backends": {
			rules: []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "orders", Port: 8080},
				Backends: split(weighted("orders", "", 50), weighted("reports", "", 50))}},
			wantErr: "has both service and backends",
		},
		"a backend without a pod selector": {
			rules:   []porticov1alpha1.Rule{{Path: "/a", NoAuth: ptr.To(true), Backends: split(weighted("orders", "", 50), weighted("external", "", 50))}},
			wantErr: "service shop/external has no pod selector",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			for _, parent := range []*porticov1alpha1.ParentReference{nil, {Namespace: "infra", Name: "public"}} {
				out, err := Translate(Input{APIRule: newAPIRule(withRules(tc.rules...)), Selectors: selectors, Parent: parent})
				if tc.wantErr == "" {
					g.Expect(err).NotTo(HaveOccurred())
					continue
				}
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(out.Objects()).To(ConsistOf(BeNil()), "nothing to write")
			}
		})
	}
}

// Every backend of a split is a workload: its Service is checked by the
// controller (Backends), and each one of the APIRule's namespace, at any
// weight, gets the rule's access policy and, for JWT, its
// RequestAuthentication.
func TestWeightedBackendsAreWorkloads(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/orders/*", JWT: jwt("https://idp.example.com", nil, nil),
			Backends: split(weighted("orders-v2", "", 100), weighted("reports", "", 0), weighted("reports", "analytics", 0))},
	))
	g.Expect(Backends(r)).To(Equal([]types.NamespacedName{
		{Namespace: "analytics", Name: "reports"}, {Namespace: "shop", Name: "orders-v2"}, {Namespace: "shop", Name: "reports"},
	}))
	out, err := Translate(Input{APIRule: r, Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Workloads).To(HaveLen(2), "no access policy in another namespace")
	for i, name := range []string{"orders-orders-v2", "orders-reports"} {
		w := out.Workloads[i]
		g.Expect(w.AuthorizationPolicy.Name).To(Equal(name), "named by PolicyName as today")
		g.Expect(w.AuthorizationPolicy.Spec.Selector.MatchLabels).To(Equal(selectors[w.Service]))
		g.Expect(w.AuthorizationPolicy.Spec.Rules).To(HaveLen(1))
		g.Expect(w.AuthorizationPolicy.Spec.Rules[0].To[0].Operation.Paths).To(Equal([]string{"/orders/*"}))
		g.Expect(w.RequestAuthentication).NotTo(BeNil())
		g.Expect(w.RequestAuthentication.Spec.JwtRules[0].Issuer).To(Equal("https://idp.example.com"))
	}
	route := out.VirtualService.Spec.Http[0].Route
	g.Expect(route).To(HaveLen(3))
	for i, want := range []struct {
		host   string
		weight int32
	}{{"orders-v2.shop.svc.cluster.local", 100}, {"reports.shop.svc.cluster.local", 0}, {"reports.analytics.svc.cluster.local", 0}} {
		g.Expect(route[i].Destination.Host).To(Equal(want.host))
		g.Expect(route[i].Weight).To(Equal(want.weight))
	}
}
