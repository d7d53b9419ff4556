package tenancy

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// Class 3, several issuers: team-a trusts its own issuer and a partner's
// (team-b's issuer, read from the partner's header) on /admin. Each token
// counts where team-a's rule reads it, and nothing another APIRule of the
// namespace adds on the same pods may change which keys or which places
// count.
func TestSeveralIssuersOnOneRule(t *testing.T) {
	svc := service(teamA, "partners")
	create(t, alice, svc)
	partners := judge.Workload{Namespace: teamA, Labels: svc.Spec.Selector}
	adminRule := severalIssuers("/admin", jwtIssuer(issuerA, keysA), jwtIssuer(issuerB, keysB, inHeader("x-partner-token", "")))
	rule := apiRule(teamA, "partners", "partners.a.example", publicGateway, backend("", "partners"), noAuth("/health"), adminRule)
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)

	partnerToken := carriedIn(tokenB, judge.InHeader("X-Partner-Token", ""))
	expectAdmin := func(t *testing.T) {
		t.Helper()
		g := NewWithT(t)
		for _, tc := range []struct {
			name    string
			token   *judge.Token
			allowed bool
		}{
			{"team-a's token in the Authorization header", tokenA, true},
			{"the partner's token in its header", partnerToken, true},
			{"no token", nil, false},
			{"a forged token of team-a's issuer", forgedA, false},
			{"the partner's token in the Authorization header, where only team-a's issuer is read", tokenB, false},
			{"the partner's token in a query parameter", carriedIn(tokenB, judge.InParam("token")), false},
			{"team-a's token in the partner's header", carriedIn(tokenA, judge.InHeader("x-partner-token", "")), false},
		} {
			r := judge.Request{Workload: partners, Host: "partners.a.example", Path: "/admin", Method: "GET", Port: 8080, Token: tc.token}
			g.Expect(decide(g, r).Allowed()).To(Equal(tc.allowed), "%s: %s", tc.name, r)
		}
	}
	t.Run("each issuer's tokens count where the rule reads them, and only there", expectAdmin)

	ensureSharedGateway(t)
	for i, attack := range []struct {
		name      string
		rule      gatewayv1alpha1.Rule
		httpRoute bool
	}{
		{"reads the partner's issuer from a query parameter", severalIssuers("/other", jwtIssuer(issuerB, keysB, inParam("token"))), false},
		{"reads the partner's issuer from the Authorization header", severalIssuers("/other", jwtIssuer(issuerB, keysB)), false},
		{"trusts the partner's issuer with team-a's keys", severalIssuers("/other", jwtIssuer(issuerB, keysA, inHeader("x-partner-token", ""))), false},
		{"lets the partner's issuer alone into /admin", severalIssuers("/admin", jwtIssuer(issuerB, keysB, inHeader("x-partner-token", ""))), false},
		{"reads the partner's issuer from a query parameter, in HTTPRoute mode", severalIssuers("/other", jwtIssuer(issuerB, keysB, inParam("token"))), true},
	} {
		t.Run("a second APIRule that "+attack.name, func(t *testing.T) {
			name := fmt.Sprintf("partners-attack-%d", i)
			second := apiRule(teamA, name, name+".a.example", publicGateway, backend("", "partners"), attack.rule)
			if attack.httpRoute {
				second = onGatewayAPI(second)
			}
			create(t, alice, second)
			t.Run("is refused with AccessConflict", func(t *testing.T) { expectRefused(t, second, gatewayv1alpha1.ReasonAccessConflict) })
			t.Run("writes nothing", func(t *testing.T) {
				awaitObserved(t, second)
				g := NewWithT(t)
				g.Expect(writtenFor(g, second)).To(BeEmpty())
			})
			t.Run("leaves /admin as it was", expectAdmin)
			t.Run("leaves the first APIRule Applied", func(t *testing.T) { expectReason(t, rule, gatewayv1alpha1.ReasonApplied) })
		})
	}

	t.Run("a second APIRule with the same issuers, in another order, is no conflict", func(t *testing.T) {
		same := severalIssuers("/reports", jwtIssuer(issuerB, keysB, inHeader("x-partner-token", "")), jwtIssuer(issuerA, keysA))
		second := apiRule(teamA, "partners-reports", "partners-reports.a.example", publicGateway, backend("", "partners"), same)
		create(t, alice, second)
		expectReason(t, second, gatewayv1alpha1.ReasonApplied)
		expectAdmin(t)
	})
}
