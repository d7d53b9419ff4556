package translate

import (
	"testing"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// policiesOf translates an APIRule named name with rules, all on the
// default Service shop/orders, and returns its access control.
func policiesOf(t *testing.T, name string, rules ...porticov1alpha1.Rule) (*securityv1.AuthorizationPolicy, *securityv1.RequestAuthentication) {
	t.Helper()
	r := newAPIRule(withRules(rules...))
	r.Name = name
	out, err := Translate(Input{APIRule: r, Selectors: selectors})
	if err != nil {
		t.Fatal(err)
	}
	return out.Workloads[0].AuthorizationPolicy, out.Workloads[0].RequestAuthentication
}

func TestAuthorizationConflict(t *testing.T) {
	admin := porticov1alpha1.Rule{Path: "/admin", JWT: jwt("https://idp", nil, nil)}
	for _, tc := range []struct {
		name     string
		a, b     porticov1alpha1.Rule
		conflict bool
	}{
		{"noAuth prefix over a JWT path", porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true)}, admin, true},
		{"noAuth on the same path", porticov1alpha1.Rule{Path: "/admin", NoAuth: ptr.To(true)}, admin, true},
		{"another issuer on the same path", porticov1alpha1.Rule{Path: "/admin", JWT: jwt("https://evil", nil, nil)}, admin, true},
		{"same issuer, fewer scopes", porticov1alpha1.Rule{Path: "/*", JWT: jwt("https://idp", nil, nil)},
			porticov1alpha1.Rule{Path: "/admin", JWT: jwt("https://idp", nil, []string{"admin"})}, true},
		{"same authentication", porticov1alpha1.Rule{Path: "/*", JWT: jwt("https://idp", nil, nil)}, admin, false},
		{"disjoint paths", porticov1alpha1.Rule{Path: "/public/*", NoAuth: ptr.To(true)}, admin, false},
		{"disjoint methods", porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Methods: []porticov1alpha1.HTTPMethod{"GET"}},
			porticov1alpha1.Rule{Path: "/admin", Methods: []porticov1alpha1.HTTPMethod{"POST"}, JWT: jwt("https://idp", nil, nil)}, false},
		{"prefixes that nest", porticov1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/api/admin/*", JWT: jwt("https://idp", nil, nil)}, true},
		{"noAuth template over a JWT path", porticov1alpha1.Rule{Path: "/{*}", NoAuth: ptr.To(true)}, admin, true},
		{"noAuth rest template over a JWT path", porticov1alpha1.Rule{Path: "/{**}", NoAuth: ptr.To(true)}, admin, true},
		{"noAuth template over a JWT template", porticov1alpha1.Rule{Path: "/orders/{*}/items", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/{*}/{*}/items", JWT: jwt("https://idp", nil, nil)}, true},
		{"a template that cannot reach the path", porticov1alpha1.Rule{Path: "/{*}/x", NoAuth: ptr.To(true)}, admin, false},
		{"a template one segment short", porticov1alpha1.Rule{Path: "/admin/{*}", NoAuth: ptr.To(true)}, admin, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := policiesOf(t, "first", tc.a)
			b, _ := policiesOf(t, "second", tc.b)
			for _, pair := range [][2]*securityv1.AuthorizationPolicy{{a, b}, {b, a}} {
				got := AuthorizationConflict(pair[0], pair[1])
				if (got != "") != tc.conflict {
					t.Fatalf("AuthorizationConflict(%s, %s) = %q, want conflict %v", pair[0].Name, pair[1].Name, got, tc.conflict)
				}
			}
		})
	}
}

func TestConflictNeedsSharedPods(t *testing.T) {
	a, _ := policiesOf(t, "first", porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true)})
	b, _ := policiesOf(t, "second", porticov1alpha1.Rule{Path: "/admin", JWT: jwt("https://idp", nil, nil)})
	b.Spec.Selector.MatchLabels = map[string]string{"app": "billing"}
	if got := AuthorizationConflict(a, b); got != "" {
		t.Fatalf("policies on pods that cannot be shared conflict: %s", got)
	}
	b.Spec.Selector.MatchLabels = map[string]string{"app": "orders", "tier": "admin"}
	if got := AuthorizationConflict(a, b); got == "" {
		t.Fatal("policies whose selectors may pick a common pod do not conflict")
	}
	b.Namespace = "other"
	if got := AuthorizationConflict(a, b); got != "" {
		t.Fatalf("policies of two namespaces conflict: %s", got)
	}
}

func TestAuthenticationConflict(t *testing.T) {
	_, a := policiesOf(t, "first", porticov1alpha1.Rule{Path: "/admin", JWT: jwt("https://idp", nil, nil)})
	evil := jwt("https://idp", nil, nil)
	evil.JWKSURI = "https://evil.example.com/jwks"
	_, b := policiesOf(t, "second", porticov1alpha1.Rule{Path: "/other", JWT: evil})
	if got := AuthenticationConflict(b, a); got == "" {
		t.Fatal("another key set for a trusted issuer does not conflict")
	}
	_, c := policiesOf(t, "third", porticov1alpha1.Rule{Path: "/other", JWT: jwt("https://other-idp", nil, nil)})
	if got := AuthenticationConflict(c, a); got != "" {
		t.Fatalf("another issuer conflicts: %s", got)
	}
	_, d := policiesOf(t, "fourth", porticov1alpha1.Rule{Path: "/other", JWT: jwt("https://idp", nil, nil)})
	if got := AuthenticationConflict(d, a); got != "" {
		t.Fatalf("the same issuer and key set conflict: %s", got)
	}
}
