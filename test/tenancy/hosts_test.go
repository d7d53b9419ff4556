package tenancy

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// Class 2: a host has one owner cluster-wide, the oldest APIRule claiming
// it (exactly or through a granted wildcard); a later claim is refused with
// a reason that names nothing of the owner's namespace, and gets the host
// when the owner goes. Wildcards need the administrator's grant.
func TestHostsHaveOneOwner(t *testing.T) {
	for _, tc := range []struct{ on, n, gateway string }{
		{on: "the same gateway", n: "1", gateway: publicGateway},
		{on: "another gateway", n: "2", gateway: internalGateway},
	} {
		t.Run("team-b claiming team-a's host on "+tc.on, func(t *testing.T) {
			t.Parallel()
			host := "shop-" + tc.n + ".example.com"
			owner := ownHost(t, "storefront-"+tc.n, host)
			claim := claimHost(t, "grab-"+tc.n, host, tc.gateway)
			wait := expectOccupied(t, claim, owner)
			t.Run("team-a keeps every path of the host", func(t *testing.T) { expectOnlyTeamARoutes(t, host, wait) })
		})
	}
	t.Run("team-b claiming a wildcard nobody granted", func(t *testing.T) {
		t.Parallel()
		claim := claimHost(t, "grab-3", "*.ungranted.example.com", publicGateway)
		expectWildcardRefused(t, claim, "any.ungranted.example.com")
	})
	t.Run("team-b claiming a wildcard granted to another namespace", func(t *testing.T) {
		t.Parallel()
		grantWildcard(t, "*.elsewhere.example.com", teamA)
		claim := claimHost(t, "grab-4", "*.elsewhere.example.com", publicGateway)
		expectWildcardRefused(t, claim, "any.elsewhere.example.com")
	})
	t.Run("team-b claiming a wildcard granted to it over team-a's older host", func(t *testing.T) {
		t.Parallel()
		grantWildcard(t, "*.mall.example.com", teamB)
		owner := ownHost(t, "storefront-5", "shop.mall.example.com")
		claim := claimHost(t, "grab-5", "*.mall.example.com", publicGateway)
		wait := expectOccupied(t, claim, owner)
		t.Run("team-a keeps every path of its host", func(t *testing.T) { expectOnlyTeamARoutes(t, "shop.mall.example.com", wait) })
		t.Run("team-a's APIRule stays Applied", func(t *testing.T) { expectReason(t, owner, gatewayv1alpha1.ReasonApplied) })
	})
	t.Run("team-b changing its hosts to team-a's", func(t *testing.T) {
		t.Parallel()
		claim := claimHost(t, "grab-6", "grab-6.b.example", publicGateway)
		// The latest version each time: the controller's finalizer may
		// have changed the APIRule since it was created, and a conflict
		// is no answer about the hosts.
		var err error
		for range 10 {
			moved := &gatewayv1alpha1.APIRule{}
			NewWithT(t).Expect(bob.Get(context.Background(), client.ObjectKeyFromObject(claim), moved)).To(Succeed())
			moved.Spec.Hosts = []gatewayv1alpha1.Hostname{"shop-1.example.com"}
			if err = bob.Update(context.Background(), moved); !apierrors.IsConflict(err) {
				break
			}
		}
		NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the API server must refuse to change spec.hosts, got %v", err)
	})
	t.Run("team-b's waiting claim when team-a's APIRule goes", func(t *testing.T) {
		t.Parallel()
		owner := ownHost(t, "storefront-7", "shop-7.example.com")
		claim := claimHost(t, "grab-7", "shop-7.example.com", publicGateway)
		expectOccupied(t, claim, owner)
		g := NewWithT(t)
		g.Expect(alice.Delete(context.Background(), owner)).To(Succeed())
		collectGarbage(t, owner)
		t.Run("becomes Applied", func(t *testing.T) { expectReason(t, claim, gatewayv1alpha1.ReasonApplied) })
		t.Run("serves the host", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(destinationNamespaces(route(g, publicGateway, "shop-7.example.com", "/"))).To(ConsistOf(teamB))
			}, eventually, poll).Should(Succeed())
		})
	})
}

// ownHost is team-a's APIRule serving host, applied before any claim.
func ownHost(t *testing.T, name, host string) *gatewayv1alpha1.APIRule {
	t.Helper()
	return ownHostOn(t, name, host, publicGateway)
}

// claimHost is team-b's APIRule claiming host with noAuth /* to its own Service.
func claimHost(t *testing.T, name, host, gateway string) *gatewayv1alpha1.APIRule {
	t.Helper()
	create(t, bob, service(teamB, name))
	rule := apiRule(teamB, name, host, gateway, backend("", name), noAuth("/*"))
	create(t, bob, rule)
	return rule
}

// expectOccupied checks a refused claim on an owned host; it returns how
// long the checks that follow should wait (see followUp).
func expectOccupied(t *testing.T, claim, owner *gatewayv1alpha1.APIRule) time.Duration {
	t.Helper()
	wait := followUp(t.Run("is refused with HostOccupied", func(t *testing.T) {
		expectRefused(t, claim, gatewayv1alpha1.ReasonHostOccupied)
		NewWithT(t).Consistently(func(g Gomega) {
			g.Expect(readyOf(g, client.ObjectKeyFromObject(claim)).Reason).To(Equal(gatewayv1alpha1.ReasonHostOccupied))
		}, 3*time.Second, poll).Should(Succeed(), "the refusal flaps")
	}))
	t.Run("its status names nothing of team-a", func(t *testing.T) { expectNoLeak(t, claim, owner.Name) })
	t.Run("no Istio object is left for it", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, claim)).To(BeEmpty()) }, wait, poll).Should(Succeed())
	})
	return wait
}

// expectOnlyTeamARoutes checks that every path of the host, on every
// gateway, goes to team-a or nowhere.
func expectOnlyTeamARoutes(t *testing.T, host string, wait time.Duration) {
	NewWithT(t).Eventually(func(g Gomega) {
		for _, gw := range []string{publicGateway, internalGateway} {
			for _, p := range []string{"/", "/admin", "/health", "/other"} {
				r := route(g, gw, host, p)
				g.Expect(destinationNamespaces(r)).NotTo(ContainElement(Not(Equal(teamA))), "%s%s on %s is routed by %v", host, p, gw, r)
			}
		}
	}, wait, poll).Should(Succeed())
}

// expectWildcardRefused checks an ungranted wildcard claim.
func expectWildcardRefused(t *testing.T, claim *gatewayv1alpha1.APIRule, covered string) {
	t.Helper()
	wait := followUp(t.Run("is refused with HostNotPermitted", func(t *testing.T) {
		expectRefused(t, claim, gatewayv1alpha1.ReasonHostNotPermitted)
	}))
	t.Run("no gateway routes a host it covers", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) { expectNotRouted(g, covered) }, wait, poll).Should(Succeed())
	})
}

// grantWildcard is the administrator granting a wildcard host to
// namespaces on the APIGateway, until the test ends.
func grantWildcard(t *testing.T, host string, namespaces ...string) {
	t.Helper()
	changeGrants(t, func(s *operatorv1alpha1.APIRulesSpec) {
		s.WildcardHosts = append(s.WildcardHosts, operatorv1alpha1.WildcardHostGrant{Host: host, Namespaces: namespaces})
	}, func(s *operatorv1alpha1.APIRulesSpec) {
		s.WildcardHosts = slices.DeleteFunc(s.WildcardHosts, func(g operatorv1alpha1.WildcardHostGrant) bool { return g.Host == host })
	})
}

// changeGrants is the administrator editing the APIGateway's
// spec.apiRules with grant, and with revoke when the test ends.
func changeGrants(t *testing.T, grant, revoke func(*operatorv1alpha1.APIRulesSpec)) {
	t.Helper()
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
	edit := func(f func(*operatorv1alpha1.APIRulesSpec)) {
		update(t, admin, gw, func(gw *operatorv1alpha1.APIGateway) {
			if gw.Spec.APIRules == nil {
				gw.Spec.APIRules = &operatorv1alpha1.APIRulesSpec{}
			}
			f(gw.Spec.APIRules)
		})
	}
	edit(grant)
	t.Cleanup(func() { edit(revoke) })
}
