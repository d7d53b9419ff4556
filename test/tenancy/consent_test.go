package tenancy

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// Tokens the judge is asked about.
var (
	// tokenA is a token of team-a's issuer, signed with team-a's keys.
	tokenA = &judge.Token{Issuer: issuerA, KeySet: keysA, Subject: "alice"}
	// forgedA claims team-a's issuer but is signed with team-b's keys.
	forgedA = &judge.Token{Issuer: issuerA, KeySet: keysB, Subject: "mallory"}
	// tokenB is a genuine token of team-b's own issuer.
	tokenB = &judge.Token{Issuer: issuerB, KeySet: keysB, Subject: "bob"}
)

// carriedIn is a copy of a token carried in another place of the request.
func carriedIn(token *judge.Token, place judge.Place) *judge.Token {
	c := *token
	c.In = place
	return &c
}

// Class 3: consent to route grants routing only; the Service's namespace
// alone decides who may call its pods, and no APIRule, of any namespace,
// widens access to a path another APIRule protects on the same workload.
func TestConsentGrantsRoutingOnly(t *testing.T) {
	t.Run("team-b's noAuth /* on team-a's consenting Service", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "ledger-1", teamB)
		rule := apiRule(teamB, "open-ledger", "ledger-1.b.example", publicGateway, backend(teamA, "ledger-1"), noAuth("/*"))
		create(t, bob, rule)
		expectRoutedOnly(t, rule, ledger)
	})
	t.Run("team-b's jwt rule with team-a's issuer and its own jwksUri", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "ledger-2", teamB)
		rule := apiRule(teamB, "rekey-ledger", "ledger-2.b.example", publicGateway, backend(teamA, "ledger-2"), jwt("/admin", issuerA, keysB))
		create(t, bob, rule)
		expectRoutedOnly(t, rule, ledger)
	})
	t.Run("team-a withdrawing its consent", func(t *testing.T) {
		t.Parallel()
		protectLedger(t, "ledger-3", teamB)
		rule := apiRule(teamB, "health-ledger", "ledger-3.b.example", publicGateway, backend(teamA, "ledger-3"), noAuth("/health"))
		create(t, bob, rule)
		expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
		update(t, alice, service(teamA, "ledger-3"), func(s *corev1.Service) { s.Annotations = nil })
		wait := followUp(t.Run("removes team-b's route", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { expectNotRouted(g, "ledger-3.b.example", "/health") }, eventually, poll).Should(Succeed())
		}))
		t.Run("removes every object of team-b's APIRule", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, rule)).To(BeEmpty()) }, wait, poll).Should(Succeed())
		})
		t.Run("reports ReferenceNotPermitted", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(readyOf(g, client.ObjectKeyFromObject(rule)).Reason).To(Equal(gatewayv1alpha1.ReasonReferenceNotPermitted))
			}, wait, poll).Should(Succeed())
		})
	})
	for i, second := range []struct {
		name string
		rule gatewayv1alpha1.Rule
	}{
		{"noAuth /*", noAuth("/*")},
		{"noAuth /admin", noAuth("/admin")},
		{"jwt /admin of another issuer", jwt("/admin", issuerB, keysB)},
		{"jwt /admin of team-a's issuer with another jwksUri", jwt("/admin", issuerA, keysB)},
		{"jwt /admin trusting team-a's issuer and team-b's", severalIssuers("/admin", jwtIssuer(issuerA, keysA), jwtIssuer(issuerB, keysB))},
		{"jwt /other trusting team-a's issuer among others, one with another jwksUri", severalIssuers("/other", jwtIssuer(issuerB, keysB), jwtIssuer(issuerA, keysB))},
		{"jwt /other reading team-a's issuer from a query parameter", severalIssuers("/other", jwtIssuer(issuerA, keysA, inParam("token")))},
		{"jwt /other reading team-a's issuer from another header", severalIssuers("/other", jwtIssuer(issuerA, keysA, inHeader("x-token", "")))},
	} {
		t.Run("a second APIRule in team-a with "+second.name+" on the same workload", func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("ledger-%d", 4+i)
			ledger := protectLedger(t, name, "")
			rule := apiRule(teamA, name+"-second", name+"-second.a.example", publicGateway, backend("", name), second.rule)
			create(t, alice, rule)
			expectAccessConflict(t, rule, ledger)
		})
	}
}

// protectLedger is team-a's Service (consenting to namespaces, if any) and
// APIRule protecting /admin with team-a's issuer; it returns the workload.
func protectLedger(t *testing.T, name, consent string) judge.Workload {
	t.Helper()
	svc := service(teamA, name)
	if consent != "" {
		consentingTo(consent)(svc)
	}
	create(t, alice, svc)
	rule := apiRule(teamA, name, name+".a.example", publicGateway, backend("", name), protectedAPI()...)
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
	return judge.Workload{Namespace: teamA, Labels: svc.Spec.Selector}
}

// expectRoutedOnly checks what another namespace's APIRule on a consenting
// Service may do: route, and nothing else.
func expectRoutedOnly(t *testing.T, rule *gatewayv1alpha1.APIRule, ledger judge.Workload) {
	t.Helper()
	t.Run("is Applied as a route", func(t *testing.T) { expectReason(t, rule, gatewayv1alpha1.ReasonApplied) })
	t.Run("writes no AuthorizationPolicy or RequestAuthentication in team-a", func(t *testing.T) {
		awaitObserved(t, rule)
		g := NewWithT(t)
		for _, obj := range writtenFor(g, rule) {
			g.Expect(obj).To(HavePrefix("VirtualService "+teamB+"/"), "team-b's APIRule wrote %s", obj)
		}
	})
	t.Run("routes to team-a's Service", func(t *testing.T) {
		g := NewWithT(t)
		r := route(g, publicGateway, string(rule.Spec.Hosts[0]), "/admin")
		g.Expect(destinationNamespaces(r)).To(ConsistOf(teamA))
	})
	t.Run("the admin path on team-a's pods still needs a token signed with team-a's keys", func(t *testing.T) {
		awaitObserved(t, rule)
		expectAdminProtected(t, ledger)
	})
}

// expectAccessConflict checks a second APIRule of team-a that would widen
// access to the first one's /admin.
func expectAccessConflict(t *testing.T, rule *gatewayv1alpha1.APIRule, ledger judge.Workload) {
	t.Helper()
	t.Run("is refused with AccessConflict", func(t *testing.T) { expectRefused(t, rule, gatewayv1alpha1.ReasonAccessConflict) })
	t.Run("writes nothing", func(t *testing.T) {
		awaitObserved(t, rule)
		g := NewWithT(t)
		g.Expect(writtenFor(g, rule)).To(BeEmpty())
	})
	t.Run("the admin path on the workload still needs a token signed with team-a's keys", func(t *testing.T) {
		awaitObserved(t, rule)
		expectAdminProtected(t, ledger)
	})
	t.Run("the first APIRule stays Applied", func(t *testing.T) {
		g := NewWithT(t)
		first := types.NamespacedName{Namespace: teamA, Name: ledger.Labels["app"]}
		g.Expect(readyOf(g, first).Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
	})
}

// expectAdminProtected judges /admin on the workload with the stored
// policies: only a token of team-a's issuer signed with team-a's keys, in
// the Authorization header, gets in.
func expectAdminProtected(t *testing.T, ledger judge.Workload) {
	t.Helper()
	g := NewWithT(t)
	for _, tc := range []struct {
		token   *judge.Token
		allowed bool
	}{
		{nil, false}, {forgedA, false}, {tokenB, false}, {tokenA, true},
		// Where team-a's rule does not read tokens, its own tokens do not count.
		{carriedIn(tokenA, judge.InParam("token")), false}, {carriedIn(tokenA, judge.InHeader("x-token", "")), false},
	} {
		r := judge.Request{Workload: ledger, Host: ledger.Labels["app"] + ".a.example", Path: "/admin", Method: "GET", Port: 8080, Token: tc.token}
		v := decide(g, r)
		g.Expect(v.Allowed()).To(Equal(tc.allowed), "%s: %s", r, v)
	}
}
