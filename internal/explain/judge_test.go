package explain

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
)

type judgeCase struct {
	name     string
	policies Policies
	request  Request
	want     Decision
}

func runCases(t *testing.T, cases []judgeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := Judge(tc.policies, tc.request)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Decision).To(Equal(tc.want), "%s: %s", tc.request, v)
			g.Expect(v.Reason).NotTo(BeEmpty())
		})
	}
}

func TestWhichPoliciesApply(t *testing.T) {
	allowNothing := func(ns string, selector map[string]string) Policies {
		return Policies{AuthorizationPolicies: aps(allow(ns, "nothing", selector))}
	}
	targeted := allow("team-a", "gateway-only", nil)
	targeted.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: "edge"}}
	runCases(t, []judgeCase{
		{"no policy at all: allowed", Policies{}, get("/admin", nil), Allowed},
		{"an ALLOW policy without rules on the workload allows nothing", allowNothing("team-a", ledgerSelector), get("/health", nil), Forbidden},
		{"a policy of another namespace does not apply", allowNothing("team-b", nil), get("/admin", nil), Allowed},
		{"a selector that does not match the labels does not apply", allowNothing("team-a", map[string]string{"app": "billing"}), get("/admin", nil), Allowed},
		{"a selector matching a subset of the labels applies", allowNothing("team-a", map[string]string{"version": "v1"}), get("/admin", nil), Forbidden},
		{"no selector applies to every workload of the namespace", allowNothing("team-a", nil), get("/admin", nil), Forbidden},
		{"the root namespace's policy with a selector applies in every namespace", allowNothing("istio-system", ledgerSelector), get("/admin", nil), Forbidden},
		{"the root namespace's policy without selector applies mesh-wide", allowNothing("istio-system", nil), get("/admin", nil), Forbidden},
		{"a configured root namespace replaces istio-system",
			Policies{AuthorizationPolicies: aps(allow("mesh-root", "nothing", nil)), RootNamespace: "mesh-root"}, get("/admin", nil), Forbidden},
		{"istio-system is an ordinary namespace under another root",
			Policies{AuthorizationPolicies: aps(allow("istio-system", "nothing", nil)), RootNamespace: "mesh-root"}, get("/admin", nil), Allowed},
		{"a policy attached by targetRefs does not apply to a sidecar", Policies{AuthorizationPolicies: aps(targeted)}, get("/admin", nil), Allowed},
	})
}

func TestActionsAreEvaluatedCustomDenyAllow(t *testing.T) {
	custom := policy("team-a", "ext-authz", securityv1beta1.AuthorizationPolicy_CUSTOM, nil, rule(paths("/admin")))
	audit := policy("team-a", "audit", securityv1beta1.AuthorizationPolicy_AUDIT, nil, rule())
	runCases(t, []judgeCase{
		{"DENY wins over a matching ALLOW", Policies{AuthorizationPolicies: aps(allow("team-a", "all", nil, rule()), deny("team-a", "admin", nil, rule(paths("/admin"))))}, get("/admin", tokenA), Forbidden},
		{"a DENY that does not match leaves the ALLOW decision", Policies{AuthorizationPolicies: aps(allow("team-a", "all", nil, rule()), deny("team-a", "admin", nil, rule(paths("/admin"))))}, get("/health", nil), Allowed},
		{"a root namespace DENY wins over the workload's ALLOW", Policies{AuthorizationPolicies: aps(allow("team-a", "all", nil, rule()), deny("istio-system", "admin", nil, rule(paths("/admin"))))}, get("/admin", nil), Forbidden},
		{"a matching CUSTOM is taken as a deny", Policies{AuthorizationPolicies: aps(allow("team-a", "all", nil, rule()), custom)}, get("/admin", nil), Forbidden},
		{"a CUSTOM that does not match changes nothing", Policies{AuthorizationPolicies: aps(custom)}, get("/health", nil), Allowed},
		{"AUDIT neither allows nor denies", Policies{AuthorizationPolicies: aps(audit, allow("team-a", "nothing", nil))}, get("/health", nil), Forbidden},
		{"one matching ALLOW policy among several suffices", Policies{AuthorizationPolicies: aps(allow("team-a", "admin", nil, rule(paths("/admin"))), allow("team-a", "health", nil, rule(paths("/health"))))}, get("/health", nil), Allowed},
		{"a DENY without rules never matches", Policies{AuthorizationPolicies: aps(deny("team-a", "empty", nil))}, get("/admin", nil), Allowed},
	})
}

func TestRuleSemantics(t *testing.T) {
	only := func(r *securityv1beta1.Rule) Policies {
		return Policies{AuthorizationPolicies: aps(allow("team-a", "p", nil, r))}
	}
	op := func(o *securityv1beta1.Operation) Policies { return only(rule(to(o))) }
	post := get("/orders", nil)
	post.Method = "POST"
	runCases(t, []judgeCase{
		{"an empty rule matches every request", only(rule()), get("/anything", nil), Allowed},
		{"from, to and when are ANDed: to matches, when does not", only(rule(paths("/health"), when("request.headers[x-team]", "a"))), get("/health", nil), Forbidden},
		{"entries of to are ORed", only(rule(paths("/admin"), paths("/health"))), get("/health", nil), Allowed},
		{"values of a field are ORed", op(&securityv1beta1.Operation{Paths: []string{"/admin", "/health"}}), get("/health", nil), Allowed},
		{"fields of an operation are ANDed", op(&securityv1beta1.Operation{Paths: []string{"/health"}, Methods: []string{"POST"}}), get("/health", nil), Forbidden},
		{"an exact path does not match a longer one", op(&securityv1beta1.Operation{Paths: []string{"/admin"}}), get("/admin/users", nil), Forbidden},
		{"a prefix path x* matches below it", op(&securityv1beta1.Operation{Paths: []string{"/admin/*"}}), get("/admin/users", nil), Allowed},
		{"a prefix path /admin/* does not match /admin", op(&securityv1beta1.Operation{Paths: []string{"/admin/*"}}), get("/admin", nil), Forbidden},
		{"a suffix path *x matches the end", op(&securityv1beta1.Operation{Paths: []string{"*.json"}}), get("/reports/q3.json", nil), Allowed},
		{"the path * matches every path", op(&securityv1beta1.Operation{Paths: []string{"*"}}), get("/admin", nil), Allowed},
		{"notPaths excludes a path", op(&securityv1beta1.Operation{NotPaths: []string{"/admin"}}), get("/admin", nil), Forbidden},
		{"notPaths lets other paths through", op(&securityv1beta1.Operation{NotPaths: []string{"/admin"}}), get("/health", nil), Allowed},
		{"methods must contain the method", op(&securityv1beta1.Operation{Methods: []string{"GET"}}), post, Forbidden},
		{"notMethods excludes the method", op(&securityv1beta1.Operation{NotMethods: []string{"POST"}}), post, Forbidden},
		{"hosts match case-insensitively", op(&securityv1beta1.Operation{Hosts: []string{"LEDGER.a.example"}}), get("/admin", nil), Allowed},
		{"notHosts with a wildcard excludes the host", op(&securityv1beta1.Operation{NotHosts: []string{"*.a.example"}}), get("/admin", nil), Forbidden},
		{"ports must contain the port", op(&securityv1beta1.Operation{Ports: []string{"9090"}}), get("/admin", nil), Forbidden},
	})
}

func TestSourcesAndConditions(t *testing.T) {
	// team-a's RequestAuthentication validates tokenA.
	only := func(opts ...ruleOption) Policies {
		return Policies{AuthorizationPolicies: aps(allow("team-a", "p", nil, rule(opts...))), RequestAuthentications: teamA().RequestAuthentications}
	}
	fromTeamB := get("/admin", nil)
	fromTeamB.From = Peer{Principal: "cluster.local/ns/team-b/sa/default", IP: netip.MustParseAddr("10.1.2.3")}
	withHeader := get("/admin", nil)
	withHeader.Headers = map[string]string{"X-Team": "a"}
	runCases(t, []judgeCase{
		{"requestPrincipals iss/* matches a valid token's principal", only(requestPrincipals(issuerA + "/*")), get("/admin", tokenA), Allowed},
		{"requestPrincipals * needs a principal", only(requestPrincipals("*")), get("/admin", nil), Forbidden},
		{"requestPrincipals *sub matches by suffix", only(requestPrincipals("*/alice")), get("/admin", tokenA), Allowed},
		{"requestPrincipals of another issuer do not match", only(requestPrincipals("https://idp.team-b.example/*")), get("/admin", tokenA), Forbidden},
		{"notRequestPrincipals * matches a request without principal", only(from(&securityv1beta1.Source{NotRequestPrincipals: []string{"*"}})), get("/admin", nil), Allowed},
		{"namespaces match the peer's namespace", only(from(&securityv1beta1.Source{Namespaces: []string{"istio-system"}})), get("/admin", nil), Allowed},
		{"notNamespaces exclude the peer's namespace", only(from(&securityv1beta1.Source{NotNamespaces: []string{"team-b"}})), fromTeamB, Forbidden},
		{"principals match the peer identity", only(from(&securityv1beta1.Source{Principals: []string{"cluster.local/ns/team-b/*"}})), fromTeamB, Allowed},
		{"ipBlocks match the peer address", only(from(&securityv1beta1.Source{IpBlocks: []string{"10.1.0.0/16"}})), fromTeamB, Allowed},
		{"remoteIpBlocks match the client address", only(from(&securityv1beta1.Source{RemoteIpBlocks: []string{"198.51.100.0/24"}})), get("/admin", nil), Forbidden},
		{"a claim condition matches a claim value", only(when("request.auth.claims[iss]", issuerA)), get("/admin", tokenA), Allowed},
		{"a list claim matches if any value matches", only(when("request.auth.claims[scope]", "admin")), get("/admin", tokenA), Allowed},
		{"a list claim with no matching value does not match", only(when("request.auth.claims[scope]", "write")), get("/admin", tokenA), Forbidden},
		{"audience conditions read the aud claim", only(when("request.auth.audiences", "ledger")), get("/admin", tokenA), Allowed},
		{"a claim condition never matches without a token", only(when("request.auth.claims[iss]", issuerA)), get("/admin", nil), Forbidden},
		{"notValues exclude a claim value", only(whenNot("request.auth.claims[sub]", "alice")), get("/admin", tokenA), Forbidden},
		{"conditions use the same wildcards", only(when("request.auth.principal", "https://idp.team-a.*")), get("/admin", tokenA), Allowed},
		{"header conditions match header names case-insensitively", only(when("request.headers[x-team]", "a")), withHeader, Allowed},
		{"source.namespace conditions read the peer", only(when("source.namespace", "team-b")), fromTeamB, Allowed},
		{"when conditions are ANDed", only(when("request.auth.claims[iss]", issuerA), when("request.auth.claims[aud]", "billing")), get("/admin", tokenA), Forbidden},
	})
}

func TestRequestAuthentication(t *testing.T) {
	otherIssuer := &Token{Issuer: "https://idp.team-b.example", KeySet: keysB, Subject: "bob"}
	withAudience := teamA()
	withAudience.RequestAuthentications = []*securityv1.RequestAuthentication{requestAuthentication("team-a", "ledger", ledgerSelector, jwtRule(issuerA, keysA, "billing"))}
	raOnly := Policies{RequestAuthentications: teamA().RequestAuthentications}
	runCases(t, []judgeCase{
		{"a token signed with the trusted key set is valid", teamA(), get("/admin", tokenA), Allowed},
		{"a token of the issuer signed with another key set is rejected", teamA(), get("/admin", forged), Unauthenticated},
		{"a token of an issuer no rule names is rejected", teamA(), get("/health", otherIssuer), Unauthenticated},
		{"a token whose audience the rule does not list is rejected", withAudience, get("/admin", tokenA), Unauthenticated},
		{"without token the request has no principal", teamA(), get("/admin", nil), Forbidden},
		{"without token an open path is allowed", teamA(), get("/health", nil), Allowed},
		{"a RequestAuthentication alone allows tokenless requests", raOnly, get("/admin", nil), Allowed},
		{"a RequestAuthentication alone rejects forged tokens", raOnly, get("/admin", forged), Unauthenticated},
		{"with no RequestAuthentication applying the token is ignored",
			Policies{AuthorizationPolicies: teamA().AuthorizationPolicies}, get("/admin", tokenA), Forbidden},
		{"another namespace's RequestAuthentication validates nothing here",
			Policies{AuthorizationPolicies: teamA().AuthorizationPolicies, RequestAuthentications: []*securityv1.RequestAuthentication{requestAuthentication("team-b", "ledger", nil, jwtRule(issuerA, keysA))}},
			get("/admin", tokenA), Forbidden},
		{"a root namespace RequestAuthentication validates mesh-wide",
			Policies{AuthorizationPolicies: teamA().AuthorizationPolicies, RequestAuthentications: []*securityv1.RequestAuthentication{requestAuthentication("istio-system", "idp", nil, jwtRule(issuerA, keysA))}},
			get("/admin", tokenA), Allowed},
	})
}

// The two ways a second object on a workload widened access before issue 13.
func TestWideningAttacks(t *testing.T) {
	openAll := allow("team-a", "team-b-ledger", ledgerSelector, rule(paths("/*")))
	secondKeys := requestAuthentication("team-a", "team-b-ledger", ledgerSelector, jwtRule(issuerA, keysB))
	runCases(t, []judgeCase{
		{"baseline: /admin needs a token", teamA(), get("/admin", nil), Forbidden},
		{"a second ALLOW policy with noAuth /* opens the JWT-protected /admin", teamA().with(aps(openAll)), get("/admin", nil), Allowed},
		{"a second ALLOW policy with noAuth /admin opens it", teamA().with(aps(allow("team-a", "x", ledgerSelector, rule(paths("/admin"))))), get("/admin", nil), Allowed},
		{"a second ALLOW policy for another issuer opens /admin to its tokens",
			teamA().with(aps(allow("team-a", "x", ledgerSelector, jwtProtected("/admin", "https://idp.team-b.example"))),
				requestAuthentication("team-a", "x", ledgerSelector, jwtRule("https://idp.team-b.example", keysB))),
			get("/admin", &Token{Issuer: "https://idp.team-b.example", KeySet: keysB, Subject: "bob"}), Allowed},
		{"baseline: a forged token is rejected", teamA(), get("/admin", forged), Unauthenticated},
		{"a second RequestAuthentication with another jwksUri for the issuer lets a forged token through",
			teamA().with(nil, secondKeys), get("/admin", forged), Allowed},
		{"the same second RequestAuthentication on another workload changes nothing",
			teamA().with(nil, requestAuthentication("team-a", "billing", map[string]string{"app": "billing"}, jwtRule(issuerA, keysB))),
			get("/admin", forged), Unauthenticated},
	})
}

// Istio merges the JWT rules of a workload: a token counts where any rule
// for its issuer reads it, and is not looked at where no rule does.
func TestTokenPlaces(t *testing.T) {
	in := func(tok *Token, p Place) *Token { c := *tok; c.In = p; return &c }
	fromHeader := func(issuer, keys, header string) *securityv1beta1.JWTRule {
		r := jwtRule(issuer, keys)
		r.FromHeaders = []*securityv1beta1.JWTHeader{{Name: header}}
		return r
	}
	fromParam := func(issuer, keys, param string) *securityv1beta1.JWTRule {
		r := jwtRule(issuer, keys)
		r.FromParams = []string{param}
		return r
	}
	secondPlace := requestAuthentication("team-a", "second", ledgerSelector, fromParam(issuerA, keysA, "token"))
	runCases(t, []judgeCase{
		{"the default places: the Authorization header", teamA(), get("/admin", tokenA), Allowed},
		{"the default places: the access_token parameter", teamA(), get("/admin", in(tokenA, InParam("access_token"))), Allowed},
		{"a header no rule reads: the token is not looked at", teamA(), get("/admin", in(tokenA, InHeader("x-token", ""))), Forbidden},
		{"a forged token where no rule reads is not rejected either", teamA(), get("/health", in(forged, InParam("token"))), Allowed},
		{"header names compare regardless of case",
			Policies{AuthorizationPolicies: teamA().AuthorizationPolicies, RequestAuthentications: []*securityv1.RequestAuthentication{requestAuthentication("team-a", "ledger", ledgerSelector, fromHeader(issuerA, keysA, "X-Token"))}},
			get("/admin", in(tokenA, InHeader("x-token", ""))), Allowed},
		{"a rule naming a header no longer reads the default places",
			Policies{AuthorizationPolicies: teamA().AuthorizationPolicies, RequestAuthentications: []*securityv1.RequestAuthentication{requestAuthentication("team-a", "ledger", ledgerSelector, fromHeader(issuerA, keysA, "x-token"))}},
			get("/admin", tokenA), Forbidden},
		{"baseline: a token in a query parameter named token is not looked at", teamA(), get("/admin", in(tokenA, InParam("token"))), Forbidden},
		{"a second RequestAuthentication reading the issuer from that parameter makes it count",
			teamA().with(nil, secondPlace), get("/admin", in(tokenA, InParam("token"))), Allowed},
	})
}

// A rule trusting several issuers is one ALLOW rule listing all of them.
func TestSeveralIssuersInOneRule(t *testing.T) {
	const issuerB = "https://idp.team-b.example"
	tokenB := &Token{Issuer: issuerB, KeySet: keysB, Subject: "bob"}
	both := Policies{
		AuthorizationPolicies: aps(allow("team-a", "ledger", ledgerSelector,
			rule(paths("/admin"), requestPrincipals(issuerA+"/*", issuerB+"/*"), when("request.auth.claims[iss]", issuerA, issuerB)))),
		RequestAuthentications: []*securityv1.RequestAuthentication{requestAuthentication("team-a", "ledger", ledgerSelector, jwtRule(issuerA, keysA), jwtRule(issuerB, keysB))},
	}
	runCases(t, []judgeCase{
		{"a token of the first issuer", both, get("/admin", tokenA), Allowed},
		{"a token of the second issuer", both, get("/admin", tokenB), Allowed},
		{"a forged token of the first issuer", both, get("/admin", forged), Unauthenticated},
		{"no token", both, get("/admin", nil), Forbidden},
	})
}

func TestWhatIsNotModelledIsAnError(t *testing.T) {
	for name, p := range map[string]*securityv1.AuthorizationPolicy{
		"a path template Istio refuses": allow("team-a", "p", nil, rule(paths("/api/{*}.json"))),
		"an unknown condition key":      allow("team-a", "p", nil, rule(when("experimental.envoy.filters.x", "y"))),
		"a nested claim":                allow("team-a", "p", nil, rule(when("request.auth.claims[realm][roles]", "admin"))),
		"a malformed ip block":          allow("team-a", "p", nil, rule(from(&securityv1beta1.Source{IpBlocks: []string{"ten.0.0.0/8"}}))),
		"a port that is no number":      allow("team-a", "p", nil, rule(to(&securityv1beta1.Operation{Ports: []string{"http"}}))),
		"a DENY with {**} not last":     deny("team-a", "p", nil, rule(paths("/{**}/admin/{*}"))),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Judge(Policies{AuthorizationPolicies: aps(p)}, get("/admin", nil))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("team-a/p")))
		})
	}
}

// Istio's path templates (Envoy's URI templates): "{*}" is one non-empty
// segment, a final "{**}" any rest of the path after its '/'.
func TestPathTemplates(t *testing.T) {
	op := func(paths ...string) Policies {
		return Policies{AuthorizationPolicies: aps(allow("team-a", "p", nil, rule(to(&securityv1beta1.Operation{Paths: paths}))))}
	}
	not := Policies{AuthorizationPolicies: aps(allow("team-a", "p", nil, rule(to(&securityv1beta1.Operation{NotPaths: []string{"/admin/{*}"}}))))}
	runCases(t, []judgeCase{
		{"{*} matches one segment", op("/orders/{*}"), get("/orders/7", nil), Allowed},
		{"{*} does not match two", op("/orders/{*}"), get("/orders/7/items", nil), Forbidden},
		{"{*} does not match an empty segment", op("/orders/{*}"), get("/orders/", nil), Forbidden},
		{"{*} in the middle", op("/orders/{*}/items"), get("/orders/7/items", nil), Allowed},
		{"literals around {*} must match", op("/orders/{*}/items"), get("/orders/7/bills", nil), Forbidden},
		{"{**} matches any rest", op("/files/{**}"), get("/files/a/b.txt", nil), Allowed},
		{"{**} matches an empty rest", op("/files/{**}"), get("/files/", nil), Allowed},
		{"{**} needs its '/'", op("/files/{**}"), get("/files", nil), Forbidden},
		{"a template is no prefix", op("/files/{**}"), get("/filesystem", nil), Forbidden},
		{"notPaths with a template", not, get("/admin/keys", nil), Forbidden},
		{"notPaths with a template lets others through", not, get("/admin/keys/1", nil), Allowed},
	})
}

// TestAuthorizerAnswersBeforeTokensAreChecked: Istio's sidecar runs the
// ext_authz filter before jwt_authn, so a request a CUSTOM rule matches is
// the authorizer's to answer even with a token no issuer validates, and
// CUSTOM rules see no request principal.
func TestAuthorizerAnswersBeforeTokensAreChecked(t *testing.T) {
	g := NewWithT(t)
	sel := map[string]string{"app": "ledger"}
	custom := policy("team-a", "ledger-extauth", securityv1beta1.AuthorizationPolicy_CUSTOM, sel, rule(paths("/secrets/*")))
	byPrincipal := policy("team-a", "ledger-extauth-jwt", securityv1beta1.AuthorizationPolicy_CUSTOM, sel,
		rule(paths("/admin/*"), requestPrincipals("https://idp.example.com/*")))
	ra := requestAuthentication("team-a", "ledger", sel, jwtRule("https://idp.example.com", "https://idp.example.com/jwks.json"))
	p := Policies{AuthorizationPolicies: aps(custom, byPrincipal), RequestAuthentications: []*securityv1.RequestAuthentication{ra}}
	forged := &Token{Issuer: "https://idp.example.com", KeySet: "https://evil.example.com/jwks.json", Subject: "eve"}
	valid := &Token{Issuer: "https://idp.example.com", KeySet: "https://idp.example.com/jwks.json", Subject: "alice"}
	w := Workload{Namespace: "team-a", Labels: sel}

	v, err := Judge(p, Request{Workload: w, Path: "/secrets/x", Method: "GET", Token: forged})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Decision).To(Equal(Forbidden))
	g.Expect(v.Reason).To(HavePrefix("CUSTOM policy team-a/ledger-extauth "))

	v, err = Judge(p, Request{Workload: w, Path: "/other", Method: "GET", Token: forged})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Decision).To(Equal(Unauthenticated), "outside the authorizer's paths the token is checked")

	v, err = Judge(p, Request{Workload: w, Path: "/admin/x", Method: "GET", Token: valid})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Allowed()).To(BeTrue(), "a CUSTOM rule on request principals sees none: the token is not validated yet")
}
