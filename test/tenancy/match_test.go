package tenancy

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// adminHeader is what an attacker hopes a header match would guard: a
// noAuth /admin that only requests with "x-admin: yes" take. The client
// chooses its headers, and the access policy cannot see which route a
// request took, so such a rule would open /admin to everyone.
func adminHeader(path string) gatewayv1alpha1.Rule {
	rule := noAuth(path)
	rule.Match = &gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{{Name: "x-admin", Exact: "yes"}}}
	return rule
}

// Class 3 (matches): a header or query-parameter match selects a route,
// never access. No rule with a match makes a path that another rule on the
// same pods guards reachable with other authentication.
func TestAHeaderMatchMayNotOpenAGuardedPath(t *testing.T) {
	t.Run("team-a's noAuth /admin with x-admin: yes beside its jwt /admin is refused by the API server", func(t *testing.T) {
		t.Parallel()
		rule := apiRule(teamA, "match-self", "match-self.a.example", publicGateway, backend("", "match-self"),
			jwt("/admin", issuerA, keysA), adminHeader("/admin"))
		err := alice.Create(context.Background(), rule)
		g := NewWithT(t)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("a match selects a route, not access"))
	})
	t.Run("through a second Service on the same pods, which the API server cannot see, it is refused with InvalidRule", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "match-pods"))
		create(t, alice, service(teamA, "match-pods-twin", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "match-pods"} }))
		open := adminHeader("/admin")
		open.Service = backend("", "match-pods-twin")
		rule := apiRule(teamA, "match-pods", "match-pods.a.example", publicGateway, backend("", "match-pods"), jwt("/admin", issuerA, keysA), open)
		create(t, alice, rule)
		t.Run("is refused with InvalidRule", func(t *testing.T) {
			c := expectRefused(t, rule, gatewayv1alpha1.ReasonInvalidRule)
			NewWithT(t).Expect(c.Message).To(ContainSubstring("a match selects a route, not access"))
		})
		t.Run("writes nothing", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			g.Expect(writtenFor(g, rule)).To(BeEmpty())
		})
	})
	for i, mode := range []string{"Istio", "HTTPRoute"} {
		t.Run(fmt.Sprintf("a second APIRule of team-a with a noAuth /admin for x-admin: yes on the same workload (%s mode)", mode), func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("ledger-match-%d", i)
			ledger := protectLedger(t, name, "")
			rule := apiRule(teamA, name+"-second", name+"-second.a.example", publicGateway, backend("", name), adminHeader("/admin"))
			if mode == "HTTPRoute" {
				ensureSharedGateway(t)
				rule = onGatewayAPI(rule)
			}
			create(t, alice, rule)
			expectAccessConflict(t, rule, ledger)
		})
	}
	t.Run("team-b's noAuth /admin for x-admin: yes on team-a's consenting Service", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "ledger-match-b", teamB)
		rule := apiRule(teamB, "match-ledger", "ledger-match-b.b.example", publicGateway, backend(teamA, "ledger-match-b"), adminHeader("/admin"))
		create(t, bob, rule)
		t.Run("is Applied as a route", func(t *testing.T) { expectReason(t, rule, gatewayv1alpha1.ReasonApplied) })
		t.Run("writes no AuthorizationPolicy or RequestAuthentication in team-a", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			for _, obj := range writtenFor(g, rule) {
				g.Expect(obj).To(HavePrefix("VirtualService "+teamB+"/"), "team-b's APIRule wrote %s", obj)
			}
		})
		t.Run("the admin path on team-a's pods still needs a token signed with team-a's keys", func(t *testing.T) {
			awaitObserved(t, rule)
			expectAdminProtected(t, ledger)
		})
	})
	t.Run("a query-parameter match: a noAuth /* for ?debug=1 over team-a's jwt /admin", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "match-query"))
		open := noAuth("/*")
		open.Match = &gatewayv1alpha1.RequestMatch{QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "debug", Exact: "1"}}}
		open.Methods = []gatewayv1alpha1.HTTPMethod{"GET"}
		rule := apiRule(teamA, "match-query", "match-query.a.example", publicGateway, backend("", "match-query"), jwt("/admin", issuerA, keysA), open)
		err := alice.Create(context.Background(), rule)
		g := NewWithT(t)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("a prefix rule covers another rule's path"))
	})
}

// Class 4 (stop updates): a regular expression Envoy would refuse would
// hold back the gateway's routes of every tenant; the controller refuses
// it before anything is written.
func TestARegexMayNotStopTheGatewaysUpdates(t *testing.T) {
	for name, regex := range map[string]string{
		"not RE2":           `(a)\1`,
		"a huge program":    "[a-z]{600}[0-9]{600}",
		"an unclosed group": "team-(",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc := "match-re-" + map[string]string{"not RE2": "backref", "a huge program": "huge", "an unclosed group": "open"}[name]
			create(t, bob, service(teamB, svc))
			rule := noAuth("/*")
			rule.Match = &gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{{Name: "x-tenant", Regex: regex}}}
			obj := apiRule(teamB, svc, svc+".b.example", publicGateway, backend("", svc), rule)
			create(t, bob, obj)
			t.Run("is refused with InvalidRule", func(t *testing.T) { expectRefused(t, obj, gatewayv1alpha1.ReasonInvalidRule) })
			t.Run("writes nothing", func(t *testing.T) {
				awaitObserved(t, obj)
				g := NewWithT(t)
				g.Expect(writtenFor(g, obj)).To(BeEmpty())
			})
		})
	}
}
