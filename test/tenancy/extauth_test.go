package tenancy

import (
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// ledgerAuthorizer is the external authorizer the administrator grants to
// team-a only; sharedAuthorizer is granted to every namespace.
const (
	ledgerAuthorizer = "ledger-authz"
	sharedAuthorizer = "shared-authz"
)

// grantAuthorizer is the administrator granting an external authorizer to
// namespaces on the APIGateway, until the test ends.
func grantAuthorizer(t *testing.T, name string, namespaces ...string) {
	t.Helper()
	changeGrants(t, func(s *operatorv1alpha1.APIRulesSpec) {
		s.ExtAuthProviders = append(s.ExtAuthProviders, operatorv1alpha1.ExtAuthProviderGrant{Name: name, Namespaces: namespaces})
	}, func(s *operatorv1alpha1.APIRulesSpec) {
		s.ExtAuthProviders = slices.DeleteFunc(s.ExtAuthProviders, func(g operatorv1alpha1.ExtAuthProviderGrant) bool { return g.Name == name })
	})
}

func extAuth(path, authorizer string) gatewayv1alpha1.Rule {
	return gatewayv1alpha1.Rule{Path: path, ExtAuth: &gatewayv1alpha1.ExtAuth{Authorizers: []string{authorizer}}}
}

// Class 3, external authorization: an authorizer sees the requests it
// decides on and its answer lets them in, so only the administrator says
// which namespaces may use it. team-b cannot use the authorizer granted to
// team-a, neither on create nor by editing an APIRule that works, in
// either mode; and within team-a no second APIRule opens a path the
// authorizer guards.
func TestExternalAuthorizersNeedTheAdministratorsGrant(t *testing.T) {
	grantAuthorizer(t, ledgerAuthorizer, teamA)
	grantAuthorizer(t, sharedAuthorizer, "*")
	svc := service(teamA, "vault")
	create(t, alice, svc)
	vault := judge.Workload{Namespace: teamA, Labels: svc.Spec.Selector}
	rule := apiRule(teamA, "vault", "vault.a.example", publicGateway, backend("", "vault"), noAuth("/health"), extAuth("/secrets/*", ledgerAuthorizer))
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)

	// The judge takes a CUSTOM policy as the authorizer saying no: a
	// request it matches is one the authorizer decides on.
	expectGuarded := func(t *testing.T) {
		t.Helper()
		g := NewWithT(t)
		for _, path := range []string{"/secrets/", "/secrets/root"} {
			v := decide(g, judge.Request{Workload: vault, Host: "vault.a.example", Path: path, Method: "GET", Port: 8080, Token: tokenA})
			g.Expect(v.Allowed()).To(BeFalse(), "%s: %s", path, v)
			g.Expect(v.Reason).To(ContainSubstring("CUSTOM policy"), "the authorizer decides on %s", path)
		}
		v := decide(g, judge.Request{Workload: vault, Host: "vault.a.example", Path: "/health", Method: "GET", Port: 8080})
		g.Expect(v.Allowed()).To(BeTrue(), "the authorizer decides on the extAuth rule's paths only: %s", v)
	}
	t.Run("team-a's authorizer decides on its paths, and only there", expectGuarded)

	ensureSharedGateway(t)
	create(t, bob, service(teamB, "borrower"))
	for i, attack := range []struct {
		name      string
		httpRoute bool
	}{{"in Istio mode", false}, {"in HTTPRoute mode", true}} {
		t.Run("team-b using team-a's authorizer "+attack.name, func(t *testing.T) {
			name := fmt.Sprintf("borrow-%d", i)
			borrowed := apiRule(teamB, name, name+".b.example", publicGateway, backend("", "borrower"), extAuth("/*", ledgerAuthorizer))
			if attack.httpRoute {
				borrowed = onGatewayAPI(borrowed)
			}
			create(t, bob, borrowed)
			t.Run("is refused with AuthorizerNotPermitted", func(t *testing.T) {
				expectRefused(t, borrowed, gatewayv1alpha1.ReasonAuthorizerNotPermitted)
			})
			t.Run("writes nothing", func(t *testing.T) {
				awaitObserved(t, borrowed)
				g := NewWithT(t)
				g.Expect(writtenFor(g, borrowed)).To(BeEmpty())
			})
			t.Run("names nothing of team-a", func(t *testing.T) { expectNoLeak(t, borrowed, "vault") })
		})
	}

	t.Run("team-b switching an Applied APIRule to team-a's authorizer", func(t *testing.T) {
		switched := apiRule(teamB, "switch", "switch.b.example", publicGateway, backend("", "borrower"), extAuth("/*", sharedAuthorizer))
		create(t, bob, switched)
		expectReason(t, switched, gatewayv1alpha1.ReasonApplied)
		update(t, bob, switched, func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].ExtAuth.Authorizers = []string{ledgerAuthorizer} })
		t.Run("is refused with AuthorizerNotPermitted", func(t *testing.T) {
			expectRefused(t, switched, gatewayv1alpha1.ReasonAuthorizerNotPermitted)
		})
		t.Run("and its objects are removed", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, switched)).To(BeEmpty()) }, eventually, poll).Should(Succeed())
		})
	})

	for i, attack := range []struct {
		name string
		rule gatewayv1alpha1.Rule
	}{
		{"opens a guarded path to anyone", noAuth("/secrets/root")},
		{"covers the guarded paths with a noAuth prefix", noAuth("/*")},
		{"hands the guarded paths to another authorizer", extAuth("/secrets/root", sharedAuthorizer)},
	} {
		t.Run("a second APIRule of team-a that "+attack.name, func(t *testing.T) {
			name := fmt.Sprintf("vault-attack-%d", i)
			second := apiRule(teamA, name, name+".a.example", publicGateway, backend("", "vault"), attack.rule)
			create(t, alice, second)
			t.Run("is refused with AccessConflict", func(t *testing.T) { expectRefused(t, second, gatewayv1alpha1.ReasonAccessConflict) })
			t.Run("writes nothing", func(t *testing.T) {
				awaitObserved(t, second)
				g := NewWithT(t)
				g.Expect(writtenFor(g, second)).To(BeEmpty())
			})
			t.Run("leaves the guarded paths to the authorizer", expectGuarded)
			t.Run("leaves the first APIRule Applied", func(t *testing.T) { expectReason(t, rule, gatewayv1alpha1.ReasonApplied) })
		})
	}
}
