package translate

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// issuers is a list-form jwt trusting the given issuers (each with its
// own key set, read from the default places), with the given alternatives.
func issuers(names []string, alternatives ...porticov1alpha1.JWTAuthorization) *porticov1alpha1.JWTAuthentication {
	j := &porticov1alpha1.JWTAuthentication{Authorizations: alternatives}
	for _, n := range names {
		j.Authentications = append(j.Authentications, porticov1alpha1.JWTIssuer{Issuer: n, JWKSURI: n + "/jwks.json"})
	}
	return j
}

func withLocations(j *porticov1alpha1.JWTAuthentication, headers []porticov1alpha1.JWTHeader, params ...string) *porticov1alpha1.JWTAuthentication {
	for i := range j.Authentications {
		j.Authentications[i].FromHeaders, j.Authentications[i].FromParams = headers, params
	}
	return j
}

func TestSameAuthenticationOfBothForms(t *testing.T) {
	scopes := func(s ...string) porticov1alpha1.JWTAuthorization {
		return porticov1alpha1.JWTAuthorization{RequiredScopes: s}
	}
	auds := func(a ...string) porticov1alpha1.JWTAuthorization {
		return porticov1alpha1.JWTAuthorization{Audiences: a}
	}
	tests := map[string]struct {
		a, b *porticov1alpha1.JWTAuthentication
		same bool
	}{
		"one issuer in either form": {jwt("https://idp", nil, nil), issuers([]string{"https://idp"}), true},
		"audiences and scopes in either form": {jwt("https://idp", []string{"a"}, []string{"s"}),
			issuers([]string{"https://idp"}, porticov1alpha1.JWTAuthorization{Audiences: []string{"a"}, RequiredScopes: []string{"s"}}), true},
		"issuers in another order":         {issuers([]string{"https://a", "https://b"}), issuers([]string{"https://b", "https://a"}), true},
		"alternatives in another order":    {issuers([]string{"https://a"}, scopes("x"), auds("y")), issuers([]string{"https://a"}, auds("y"), scopes("x")), true},
		"one more issuer":                  {issuers([]string{"https://a"}), issuers([]string{"https://a", "https://b"}), false},
		"one more alternative":             {issuers([]string{"https://a"}, scopes("x")), issuers([]string{"https://a"}, scopes("x"), scopes("y")), false},
		"no alternative against one":       {issuers([]string{"https://a"}), issuers([]string{"https://a"}, scopes("x")), false},
		"the same issuer read elsewhere":   {issuers([]string{"https://a"}), withLocations(issuers([]string{"https://a"}), nil, "token"), false},
		"explicit default places":          {issuers([]string{"https://a"}), withLocations(issuers([]string{"https://a"}), []porticov1alpha1.JWTHeader{{Name: "Authorization", Prefix: "Bearer "}}, "access_token"), true},
		"header names differ only in case": {withLocations(issuers([]string{"https://a"}), []porticov1alpha1.JWTHeader{{Name: "X-Token"}}), withLocations(issuers([]string{"https://a"}), []porticov1alpha1.JWTHeader{{Name: "x-token"}}), true},
		"header prefixes differ":           {withLocations(issuers([]string{"https://a"}), []porticov1alpha1.JWTHeader{{Name: "x-token"}}), withLocations(issuers([]string{"https://a"}), []porticov1alpha1.JWTHeader{{Name: "x-token", Prefix: "Bearer "}}), false},
		"scopes split across alternatives": {issuers([]string{"https://a"}, scopes("x", "y")), issuers([]string{"https://a"}, scopes("x"), scopes("y")), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := porticov1alpha1.Rule{Path: "/a", JWT: tc.a}
			b := porticov1alpha1.Rule{Path: "/b", JWT: tc.b}
			NewWithT(t).Expect(sameAuthentication(a, b)).To(Equal(tc.same), "%s vs %s", authentication(a), authentication(b))
			NewWithT(t).Expect(sameAuthentication(b, a)).To(Equal(tc.same))
		})
	}
}

// The ALLOW rules of a jwt rule are exact: a token valid for any listed
// issuer (pinned by its iss claim) that satisfies any alternative, each
// alternative one rule with all its scopes and one of its audiences.
func TestSeveralIssuersAndAlternatives(t *testing.T) {
	g := NewWithT(t)
	rule := porticov1alpha1.Rule{Path: "/orders", JWT: issuers([]string{"https://b", "https://a"},
		porticov1alpha1.JWTAuthorization{RequiredScopes: []string{"write", "read"}, Audiences: []string{"orders"}},
		porticov1alpha1.JWTAuthorization{RequiredScopes: []string{"admin"}},
	)}
	rule.JWT.Authentications[0].FromHeaders = []porticov1alpha1.JWTHeader{{Name: "x-b-token", Prefix: "Token "}}
	ap, ra := policiesOf(t, "orders", rule)
	g.Expect(ap.Spec.Rules).To(HaveLen(2))
	for _, r := range ap.Spec.Rules {
		g.Expect(r.To[0].Operation.Paths).To(Equal([]string{"/orders"}))
		g.Expect(r.From[0].Source.RequestPrincipals).To(Equal([]string{"https://a/*", "https://b/*"}))
		g.Expect(r.When[0].Key).To(Equal("request.auth.claims[iss]"))
		g.Expect(r.When[0].Values).To(Equal([]string{"https://a", "https://b"}))
	}
	g.Expect(demands(ap.Spec.Rules[0])).To(HaveSuffix("request.auth.claims[scope]=admin"))
	g.Expect(demands(ap.Spec.Rules[1])).To(HaveSuffix("request.auth.claims[aud]=orders request.auth.claims[scope]=read request.auth.claims[scope]=write"))
	g.Expect(ra.Spec.JwtRules).To(HaveLen(2))
	g.Expect(ra.Spec.JwtRules[0].Issuer).To(Equal("https://a"))
	g.Expect(ra.Spec.JwtRules[0].FromHeaders).To(BeEmpty(), "the default places stay implicit")
	g.Expect(ra.Spec.JwtRules[1].Issuer).To(Equal("https://b"))
	g.Expect(ra.Spec.JwtRules[1].FromHeaders).To(HaveLen(1))
	g.Expect(ra.Spec.JwtRules[1].FromHeaders[0].Name).To(Equal("x-b-token"))
	g.Expect(ra.Spec.JwtRules[1].FromHeaders[0].Prefix).To(Equal("Token "))
}

func TestIssuerConsistencyAcrossRules(t *testing.T) {
	tests := map[string]struct {
		rules   []porticov1alpha1.Rule
		wantErr string
	}{
		"an issuer of a list with another key set than a single-issuer rule": {
			rules: []porticov1alpha1.Rule{
				{Path: "/a", JWT: jwt("https://idp", nil, nil)},
				{Path: "/b", JWT: &porticov1alpha1.JWTAuthentication{Authentications: []porticov1alpha1.JWTIssuer{{Issuer: "https://idp", JWKSURI: "https://evil/jwks.json"}}}},
			},
			wantErr: "one issuer needs one key set",
		},
		"an issuer read from a query parameter in one rule only": {
			rules: []porticov1alpha1.Rule{
				{Path: "/a", JWT: jwt("https://idp", nil, nil)},
				{Path: "/b", JWT: withLocations(issuers([]string{"https://idp"}), nil, "token")},
			},
			wantErr: "read tokens of issuer https://idp from param token",
		},
		"a list prefix over a single-issuer path it widens": {
			rules: []porticov1alpha1.Rule{
				{Path: "/api/*", JWT: issuers([]string{"https://idp", "https://partner"})},
				{Path: "/api/admin", JWT: jwt("https://idp", nil, nil)},
			},
			wantErr: "rule /api/* (jwt issuers https://idp,https://partner) covers rule /api/admin (jwt issuer https://idp)",
		},
		"a list prefix whose alternative skips the covered path's scope": {
			rules: []porticov1alpha1.Rule{
				{Path: "/api/*", JWT: issuers([]string{"https://idp"}, porticov1alpha1.JWTAuthorization{RequiredScopes: []string{"admin"}}, porticov1alpha1.JWTAuthorization{Audiences: []string{"public"}})},
				{Path: "/api/admin", JWT: issuers([]string{"https://idp"}, porticov1alpha1.JWTAuthorization{RequiredScopes: []string{"admin"}})},
			},
			wantErr: "scopes admin or audiences public) covers rule /api/admin",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Translate(Input{APIRule: newAPIRule(withRules(tc.rules...)), Selectors: selectors})
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
	t.Run("the same issuer, key set and places in both forms", func(t *testing.T) {
		_, err := Translate(Input{APIRule: newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/api/*", JWT: issuers([]string{"https://idp"})},
			porticov1alpha1.Rule{Path: "/api/admin", JWT: jwt("https://idp", nil, nil)},
			porticov1alpha1.Rule{Path: "/other", JWT: issuers([]string{"https://idp", "https://partner"})},
		)), Selectors: selectors})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	})
}

func TestAuthenticationConflictOnTokenLocations(t *testing.T) {
	g := NewWithT(t)
	_, victim := policiesOf(t, "first", porticov1alpha1.Rule{Path: "/admin", JWT: jwt("https://idp", nil, nil)})
	_, inParam := policiesOf(t, "second", porticov1alpha1.Rule{Path: "/other", JWT: withLocations(issuers([]string{"https://idp"}), nil, "token")})
	g.Expect(AuthenticationConflict(inParam, victim)).To(ContainSubstring("read tokens of issuer https://idp from different places"))
	g.Expect(AuthenticationConflict(victim, inParam)).NotTo(BeEmpty())
	_, inHeader := policiesOf(t, "third", porticov1alpha1.Rule{Path: "/other", JWT: withLocations(issuers([]string{"https://idp"}), []porticov1alpha1.JWTHeader{{Name: "x-token"}})})
	g.Expect(AuthenticationConflict(inHeader, victim)).NotTo(BeEmpty())
	_, sameDefault := policiesOf(t, "fourth", porticov1alpha1.Rule{Path: "/other", JWT: issuers([]string{"https://idp", "https://partner"})})
	g.Expect(AuthenticationConflict(sameDefault, victim)).To(BeEmpty(), "the same issuer, keys and places, beside another issuer")
	_, otherIssuer := policiesOf(t, "fifth", porticov1alpha1.Rule{Path: "/other", JWT: withLocations(issuers([]string{"https://partner"}), nil, "token")})
	g.Expect(AuthenticationConflict(otherIssuer, victim)).To(BeEmpty(), "another issuer may read its tokens anywhere")
}

// Two APIRules that guard a path with the same alternatives do not
// conflict, whatever the order; one more alternative, or one more issuer,
// opens the path to other callers.
func TestAuthorizationConflictWithAlternatives(t *testing.T) {
	read := porticov1alpha1.JWTAuthorization{RequiredScopes: []string{"read"}}
	admin := porticov1alpha1.JWTAuthorization{RequiredScopes: []string{"admin"}}
	victimRule := porticov1alpha1.Rule{Path: "/admin", JWT: issuers([]string{"https://idp"}, admin, read)}
	tests := map[string]struct {
		rule     porticov1alpha1.Rule
		conflict bool
	}{
		"the same alternatives in another order": {porticov1alpha1.Rule{Path: "/admin", JWT: issuers([]string{"https://idp"}, read, admin)}, false},
		"one alternative more":                   {porticov1alpha1.Rule{Path: "/admin", JWT: issuers([]string{"https://idp"}, read, admin, porticov1alpha1.JWTAuthorization{Audiences: []string{"x"}})}, true},
		"one alternative fewer":                  {porticov1alpha1.Rule{Path: "/admin", JWT: issuers([]string{"https://idp"}, read)}, true},
		"one issuer more":                        {porticov1alpha1.Rule{Path: "/admin", JWT: issuers([]string{"https://idp", "https://partner"}, read, admin)}, true},
		"noAuth":                                 {porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true)}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, _ := policiesOf(t, "first", victimRule)
			b, _ := policiesOf(t, "second", tc.rule)
			NewWithT(t).Expect(AuthorizationConflict(b, a) != "").To(Equal(tc.conflict), AuthorizationConflict(b, a))
			NewWithT(t).Expect(AuthorizationConflict(a, b) != "").To(Equal(tc.conflict))
		})
	}
}
