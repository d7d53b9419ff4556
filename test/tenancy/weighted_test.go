package tenancy

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// split is a rule that splits path between Services by percentage.
func split(rule gatewayv1alpha1.Rule, backends ...gatewayv1alpha1.WeightedBackend) gatewayv1alpha1.Rule {
	rule.Backends = backends
	return rule
}

func weighted(svc *gatewayv1alpha1.ServiceReference, weight int32) gatewayv1alpha1.WeightedBackend {
	return gatewayv1alpha1.WeightedBackend{Service: *svc, Weight: weight}
}

// Classes 1 and 3 through weighted backends: every backend of a split is
// checked as a rule's service is, and a refused one, whatever its weight,
// refuses the whole APIRule with nothing written.
func TestWeightedBackendsAreCheckedEach(t *testing.T) {
	create(t, alice, service(teamA, "split-billing"))
	billingPod := workloadPod(t, teamA, "split-billing-0", map[string]string{"app": "split-billing"}, "10.244.1.20")
	aliases := []struct {
		name   string
		weight int32
		alias  func(t *testing.T, name string)
	}{
		{"an ExternalName Service aliasing team-a's Service as a 10% canary", 10, func(t *testing.T, name string) {
			create(t, bob, service(teamB, name, externalName("split-billing.team-a.svc.cluster.local")))
		}},
		{"an ExternalName Service aliasing team-a's Service at weight 0", 0, func(t *testing.T, name string) {
			create(t, bob, service(teamB, name, externalName("split-billing.team-a.svc.cluster.local")))
		}},
		{"a selector-less Service whose EndpointSlice holds team-a's pod IP", 10, func(t *testing.T, name string) {
			create(t, bob, service(teamB, name, withoutSelector()))
			create(t, admin, endpointSlice(teamB, name, name+"-1", billingPod))
		}},
	}
	for i, attack := range aliases {
		t.Run("a weighted backend that is "+attack.name, func(t *testing.T) {
			t.Parallel()
			own, alias := fmt.Sprintf("split-own-%d", i), fmt.Sprintf("split-alias-%d", i)
			create(t, bob, service(teamB, own))
			attack.alias(t, alias)
			rule := apiRule(teamB, alias, alias+".b.example", publicGateway, nil,
				split(noAuth("/*"), weighted(backend("", own), 100-attack.weight), weighted(backend("", alias), attack.weight)))
			create(t, bob, rule)
			expectAliasRefused(t, rule)
		})
	}
	t.Run("a weighted backend in team-a, which does not consent", func(t *testing.T) {
		t.Parallel()
		create(t, bob, service(teamB, "split-own-nc"))
		create(t, alice, service(teamA, "split-ledger-nc"))
		rule := apiRule(teamB, "split-nc", "split-nc.b.example", publicGateway, nil,
			split(noAuth("/*"), weighted(backend("", "split-own-nc"), 99), weighted(backend(teamA, "split-ledger-nc"), 1)))
		create(t, bob, rule)
		expectRefused(t, rule, gatewayv1alpha1.ReasonReferenceNotPermitted)
		NewWithT(t).Consistently(func(g Gomega) {
			g.Expect(writtenFor(g, rule)).To(BeEmpty())
			expectNotRouted(g, "split-nc.b.example")
		}, "2s", poll).Should(Succeed())
	})
	t.Run("in HTTPRoute mode, a weighted backend in team-a, which consents but grants no ReferenceGrant", func(t *testing.T) {
		t.Parallel()
		ensureSharedGateway(t)
		create(t, bob, service(teamB, "split-own-gw"))
		create(t, alice, service(teamA, "split-ledger-gw", consentingTo(teamB)))
		rule := onGatewayAPI(apiRule(teamB, "split-gw", "split-gw.b.example", "", nil,
			split(noAuth("/*"), weighted(backend("", "split-own-gw"), 50), weighted(backend(teamA, "split-ledger-gw"), 50))))
		create(t, bob, rule)
		expectRefused(t, rule, gatewayv1alpha1.ReasonReferenceNotPermitted)
		NewWithT(t).Consistently(func(g Gomega) { g.Expect(writtenFor(g, rule)).To(BeEmpty()) }, "2s", poll).Should(Succeed())
	})
}

// Class 3 through weighted backends: a split into a consenting Service
// routes there and sets no access rule in its namespace, and a split
// within team-a that reaches a protected workload, even at weight 0,
// cannot open what another APIRule guards there.
func TestWeightedBackendsWidenNoAccess(t *testing.T) {
	t.Run("team-b splitting noAuth /* between its Service and team-a's consenting one", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "split-ledger-1", teamB)
		create(t, bob, service(teamB, "split-own-1"))
		rule := apiRule(teamB, "split-open", "split-open.b.example", publicGateway, nil,
			split(noAuth("/*"), weighted(backend("", "split-own-1"), 50), weighted(backend(teamA, "split-ledger-1"), 50)))
		create(t, bob, rule)
		t.Run("is Applied", func(t *testing.T) { expectReason(t, rule, gatewayv1alpha1.ReasonApplied) })
		t.Run("writes nothing in team-a", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			written := writtenFor(g, rule)
			g.Expect(written).To(ContainElement("AuthorizationPolicy "+teamB+"/split-open-split-own-1"), "its own backend is protected")
			for _, obj := range written {
				g.Expect(obj).NotTo(ContainSubstring(" "+teamA+"/"), "team-b's APIRule wrote %s", obj)
			}
		})
		t.Run("routes to both namespaces", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(destinationNamespaces(route(g, publicGateway, "split-open.b.example", "/admin"))).To(ConsistOf(teamB, teamA))
		})
		t.Run("the admin path on team-a's pods still needs a token signed with team-a's keys", func(t *testing.T) {
			awaitObserved(t, rule)
			expectAdminProtected(t, ledger)
		})
	})
	for i, weight := range []int32{50, 0} {
		t.Run(fmt.Sprintf("a second APIRule in team-a splitting noAuth /* onto the protected workload at weight %d", weight), func(t *testing.T) {
			t.Parallel()
			name, own := fmt.Sprintf("split-ledger-%d", 2+i), fmt.Sprintf("split-other-%d", 2+i)
			ledger := protectLedger(t, name, "")
			create(t, alice, service(teamA, own))
			rule := apiRule(teamA, name+"-second", name+"-second.a.example", publicGateway, nil,
				split(noAuth("/*"), weighted(backend("", own), 100-weight), weighted(backend("", name), weight)))
			create(t, alice, rule)
			expectAccessConflict(t, rule, ledger)
		})
	}
}
