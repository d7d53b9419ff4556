package translate

import (
	"testing"

	. "github.com/onsi/gomega"
	securityv1beta1 "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func extAuth(authorizer string, restrictions *porticov1alpha1.JWTAuthentication) *porticov1alpha1.ExtAuth {
	return &porticov1alpha1.ExtAuth{Authorizers: []string{authorizer}, Restrictions: restrictions}
}

func TestExtAuthPolicies(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
		porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"GET"}, ExtAuth: extAuth("ext-authz", nil)},
		porticov1alpha1.Rule{Path: "/old/*", ExtAuth: extAuth("ext-authz", jwt("https://idp", nil, nil)), Rewrite: &porticov1alpha1.Rewrite{Prefix: "/v2/"}},
	))
	out, err := Translate(Input{APIRule: r, Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Workloads).To(HaveLen(1))
	w := out.Workloads[0]

	custom := w.CustomPolicy
	g.Expect(custom).NotTo(BeNil())
	g.Expect(custom.Name).To(Equal("orders-extauth"))
	g.Expect(custom.Spec.Action).To(Equal(securityv1beta1.AuthorizationPolicy_CUSTOM))
	g.Expect(custom.Spec.GetProvider().GetName()).To(Equal("ext-authz"))
	g.Expect(custom.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "orders"}))
	var paths []string
	for _, rule := range custom.Spec.Rules {
		paths = append(paths, rule.To[0].Operation.Paths...)
	}
	g.Expect(paths).To(ConsistOf("/orders/*", "/v2/*"), "the paths the backend sees, and no other rule's")
	g.Expect(out.Objects()).To(ContainElement(custom), "pruned and written like every desired object")

	g.Expect(w.RequestAuthentication).NotTo(BeNil(), "restrictions trust their issuer")
	var allowed []string
	for _, rule := range w.AuthorizationPolicy.Spec.Rules {
		allowed = append(allowed, callerOf(rule)+" "+rule.To[0].Operation.Paths[0])
	}
	g.Expect(allowed).To(ConsistOf("anyone /health", "anyone /orders/*",
		"https://idp/* request.auth.claims[iss]=https://idp /v2/*"), "ALLOW admits what the authorizer passed, with the restrictions' token")

	plain, err := Translate(Input{APIRule: newAPIRule(), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.Workloads[0].CustomPolicy).To(BeNil())
}

func TestExtAuthChecks(t *testing.T) {
	for name, tc := range map[string]struct {
		rules   []porticov1alpha1.Rule
		wantErr string
	}{
		"one authorizer on two services of other pods": {rules: []porticov1alpha1.Rule{
			{Path: "/a", ExtAuth: extAuth("one", nil)},
			{Path: "/b", ExtAuth: extAuth("two", nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 80}},
		}},
		"two authorizers on one workload": {rules: []porticov1alpha1.Rule{
			{Path: "/a", ExtAuth: extAuth("one", nil)},
			{Path: "/b", ExtAuth: extAuth("two", nil)},
		}, wantErr: "Istio calls one external authorizer per workload"},
		"two authorizers on two services selecting the same pods": {rules: []porticov1alpha1.Rule{
			{Path: "/a", ExtAuth: extAuth("one", nil)},
			{Path: "/b", ExtAuth: extAuth("two", nil), Service: &porticov1alpha1.ServiceReference{Name: "orders-admin", Port: 80}},
		}, wantErr: "Istio calls one external authorizer per workload"},
		"extAuth on another namespace's service": {rules: []porticov1alpha1.Rule{
			{Path: "/a", ExtAuth: extAuth("one", nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 80}},
		}, wantErr: "the authorizer would never be asked"},
		"a noAuth prefix covering an extAuth path": {rules: []porticov1alpha1.Rule{
			{Path: "/api/*", NoAuth: ptr.To(true)},
			{Path: "/api/admin", ExtAuth: extAuth("one", nil)},
		}, wantErr: "rule /api/* (noAuth) covers rule /api/admin (extAuth one)"},
		"an extAuth prefix covering a noAuth path": {rules: []porticov1alpha1.Rule{
			{Path: "/api/*", ExtAuth: extAuth("one", nil)},
			{Path: "/api/public", NoAuth: ptr.To(true)},
		}, wantErr: "rule /api/* (extAuth one) covers rule /api/public (noAuth)"},
		"an extAuth prefix covering a path with the same authorizer and restrictions": {rules: []porticov1alpha1.Rule{
			{Path: "/api/*", ExtAuth: extAuth("one", jwt("https://idp", nil, nil))},
			{Path: "/api/x", ExtAuth: extAuth("one", jwt("https://idp", nil, nil))},
		}},
		"an extAuth prefix covering a jwt path with the restrictions as jwt": {rules: []porticov1alpha1.Rule{
			{Path: "/api/*", ExtAuth: extAuth("one", jwt("https://idp", nil, nil))},
			{Path: "/api/x", JWT: jwt("https://idp", nil, nil)},
		}, wantErr: "(extAuth one then jwt issuer https://idp) covers rule /api/x (jwt issuer https://idp)"},
		"restrictions with another key set for an issuer jwt trusts": {rules: []porticov1alpha1.Rule{
			{Path: "/a", JWT: jwt("https://idp", nil, nil)},
			{Path: "/b", ExtAuth: extAuth("one", &porticov1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://other/keys"})},
		}, wantErr: "one issuer needs one key set"},
		"a noAuth rewrite into an extAuth path": {rules: []porticov1alpha1.Rule{
			{Path: "/admin", ExtAuth: extAuth("one", nil)},
			{Path: "/status", NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Path: "/admin"}},
		}, wantErr: "rewrites to /admin"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Translate(Input{APIRule: newAPIRule(withRules(tc.rules...)), Selectors: selectors})
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestExtAuthPolicyName(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule()
	r.Name = "a-very-long-apirule-name-that-fills-most-of-the-sixty-three-c"
	name := ExtAuthPolicyName(r, types.NamespacedName{Namespace: "shop", Name: "orders"})
	g.Expect(len(name)).To(BeNumerically("<=", 63))
	g.Expect(name).NotTo(Equal(PolicyName(r, types.NamespacedName{Namespace: "shop", Name: "orders"})))

	// A Service named "extauth" would give its ALLOW policy the CUSTOM
	// policy's name of the default Service.
	clash := newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/a", ExtAuth: extAuth("one", nil)},
		porticov1alpha1.Rule{Path: "/b", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "extauth", Port: 80}},
	))
	sel := map[types.NamespacedName]map[string]string{
		{Namespace: "shop", Name: "orders"}:  {"app": "orders"},
		{Namespace: "shop", Name: "extauth"}: {"app": "other"},
	}
	_, err := Translate(Input{APIRule: clash, Selectors: sel})
	g.Expect(err).To(MatchError(ContainSubstring("would share the access policy shop/orders-extauth")))
}

// policies builds an APIRule's access on the orders pods from its rules.
func policies(t *testing.T, name string, rules ...porticov1alpha1.Rule) Access {
	t.Helper()
	r := newAPIRule(withRules(rules...))
	r.Name = name
	out, err := Translate(Input{APIRule: r, Selectors: selectors})
	if err != nil {
		t.Fatal(err)
	}
	return Access{Allow: out.Workloads[0].AuthorizationPolicy, Custom: out.Workloads[0].CustomPolicy}
}

func TestCustomConflict(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b []porticov1alpha1.Rule
		want string
	}{
		"disjoint paths": {
			a: []porticov1alpha1.Rule{{Path: "/a/*", ExtAuth: extAuth("one", nil)}},
			b: []porticov1alpha1.Rule{{Path: "/b/*", NoAuth: ptr.To(true)}},
		},
		"another authorizer on the same pods": {
			a:    []porticov1alpha1.Rule{{Path: "/a/*", ExtAuth: extAuth("one", nil)}},
			b:    []porticov1alpha1.Rule{{Path: "/b/*", ExtAuth: extAuth("two", nil)}},
			want: "Istio calls one external authorizer per workload",
		},
		"an authorizer over another's noAuth path": {
			a:    []porticov1alpha1.Rule{{Path: "/api/*", ExtAuth: extAuth("one", nil)}},
			b:    []porticov1alpha1.Rule{{Path: "/api/public", NoAuth: ptr.To(true)}},
			want: "hands path /api/public to authorizer one",
		},
		"a noAuth prefix over another's authorizer": {
			a:    []porticov1alpha1.Rule{{Path: "/api/admin", ExtAuth: extAuth("one", nil)}},
			b:    []porticov1alpha1.Rule{{Path: "/api/*", NoAuth: ptr.To(true)}},
			want: "allows it to anyone without that authorizer",
		},
		"the same authorizer on both paths": {
			a: []porticov1alpha1.Rule{{Path: "/api/*", ExtAuth: extAuth("one", nil)}},
			b: []porticov1alpha1.Rule{{Path: "/api/x", ExtAuth: extAuth("one", nil)}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			a, b := policies(t, "a", tc.a...), policies(t, "b", tc.b...)
			for _, got := range []string{CustomConflict(a, b), CustomConflict(b, a)} {
				if tc.want == "" {
					g.Expect(got).To(BeEmpty())
					continue
				}
				g.Expect(got).To(ContainSubstring(tc.want))
			}
		})
	}
	t.Run("other pods", func(t *testing.T) {
		a := policies(t, "a", porticov1alpha1.Rule{Path: "/api/*", ExtAuth: extAuth("one", nil)})
		b := policies(t, "b", porticov1alpha1.Rule{Path: "/api/*", ExtAuth: extAuth("two", nil)})
		b.Custom.Spec.Selector.MatchLabels = map[string]string{"app": "reports"}
		b.Allow.Spec.Selector.MatchLabels = map[string]string{"app": "reports"}
		NewWithT(t).Expect(CustomConflict(a, b)).To(BeEmpty())
	})
	t.Run("ALLOW policies alone are AuthorizationConflict's", func(t *testing.T) {
		NewWithT(t).Expect(CustomConflict(Access{Allow: &securityv1.AuthorizationPolicy{}}, Access{})).To(BeEmpty())
	})
}
