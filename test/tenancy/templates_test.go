package tenancy

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Class 1 (widening) with path templates: a template matches paths it does
// not spell, so "/{*}" opens "/admin" as a prefix "/*" would. Istio adds
// up ALLOW rules on a workload, so a template is judged against every path
// it can match: within an APIRule (InvalidRule) and against the live
// policies of another (AccessConflict), in both modes; across namespaces it
// only routes.
func TestNoTemplateOpensAGuardedPath(t *testing.T) {
	t.Run("team-a's noAuth /{*} beside its own jwt /admin", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "template-self"))
		rule := apiRule(teamA, "template-self", "template-self.a.example", publicGateway, backend("", "template-self"),
			jwt("/admin", issuerA, keysA), noAuth("/{*}"))
		create(t, alice, rule)
		t.Run("is refused with InvalidRule", func(t *testing.T) {
			c := expectRefused(t, rule, gatewayv1alpha1.ReasonInvalidRule)
			NewWithT(t).Expect(c.Message).To(ContainSubstring("rule /{*} (noAuth) meets rule /admin"))
		})
		t.Run("writes nothing", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			g.Expect(writtenFor(g, rule)).To(BeEmpty())
		})
	})
	ensureSharedGateway(t)
	for i, attack := range []struct {
		path      string
		httpRoute bool
	}{{"/{*}", false}, {"/{**}", false}, {"/{*}", true}} {
		mode := "Istio mode"
		if attack.httpRoute {
			mode = "HTTPRoute mode"
		}
		t.Run(fmt.Sprintf("a second APIRule in team-a with noAuth %s on the same workload, %s", attack.path, mode), func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("ledger-tpl-%d", i)
			ledger := protectLedger(t, name, "")
			rule := apiRule(teamA, name+"-second", name+"-second.a.example", publicGateway, backend("", name), noAuth(attack.path))
			if attack.httpRoute {
				rule = onGatewayAPI(rule)
			}
			create(t, alice, rule)
			expectAccessConflict(t, rule, ledger)
		})
	}
	t.Run("team-b with noAuth /{**} on team-a's consenting Service", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "ledger-tpl-b", teamB)
		rule := apiRule(teamB, "template-ledger", "ledger-tpl-b.b.example", publicGateway, backend(teamA, "ledger-tpl-b"), noAuth("/{**}"))
		create(t, bob, rule)
		expectRoutedOnly(t, rule, ledger)
	})
	t.Run("team-b hiding a wildcard inside a segment", func(t *testing.T) {
		t.Parallel()
		protectLedger(t, "ledger-tpl-odd", teamB)
		for _, path := range []string{"/adm{*}", "/{**}/admin", "/{*}/*", "/{id}"} {
			rule := apiRule(teamB, "template-odd", "ledger-tpl-odd.b.example", publicGateway, backend(teamA, "ledger-tpl-odd"), noAuth(path))
			err := bob.Create(context.Background(), rule)
			NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", path, err)
		}
	})
}
