package tenancy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// holdFinalizer is someone else's finalizer (not Portico's) that keeps an
// object in deletion.
const holdFinalizer = "example.com/hold"

// Class 2, the terminating owner: a host stays owned by its claim until the
// owner's objects are gone; the next claim is applied only after that, so
// two tenants' routes are never live for one host.
func TestATerminatingOwnerKeepsItsHostsUntilItsObjectsAreGone(t *testing.T) {
	for i, hold := range []struct{ what string }{
		{"someone else's finalizer on team-a's APIRule"},
		{"someone else's finalizer on team-a's VirtualService"},
		{"foreground deletion (the garbage collector's finalizer)"},
	} {
		t.Run("held by "+hold.what, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			host := fmt.Sprintf("leaving-%d.example.com", i)
			owner := ownHost(t, fmt.Sprintf("owner-%d", i), host)
			claim := claimHost(t, fmt.Sprintf("waiting-%d", i), host, publicGateway)
			expectOccupied(t, claim, owner)
			var vs *networkingv1.VirtualService
			g.Eventually(func(g Gomega) { vs = virtualServiceOf(g, owner) }, eventually, poll).Should(Succeed())

			deleteOpts := []client.DeleteOption{}
			switch i {
			case 0:
				addFinalizer(t, owner)
			case 1:
				addFinalizer(t, vs)
			case 2:
				// envtest runs no garbage collector: the APIRule keeps its
				// foregroundDeletion finalizer, as while a real one waits.
				deleteOpts = append(deleteOpts, client.PropagationPolicy(metav1.DeletePropagationForeground))
				t.Cleanup(func() { removeFinalizers(t, owner) })
			}
			g.Expect(alice.Delete(ctx, owner, deleteOpts...)).To(Succeed())

			if i == 1 {
				t.Run("while team-a's VirtualService is held, team-b's claim stays refused and writes nothing", func(t *testing.T) {
					NewWithT(t).Consistently(func(g Gomega) {
						g.Expect(readyOf(g, client.ObjectKeyFromObject(claim)).Reason).To(Equal(gatewayv1alpha1.ReasonHostOccupied))
						g.Expect(writtenFor(g, claim)).To(BeEmpty())
					}, 3*time.Second, poll).Should(Succeed())
				})
				removeFinalizers(t, vs)
			}
			t.Run("never are both tenants' routes live, and team-b's claim is applied once team-a's are gone", func(t *testing.T) {
				g := NewWithT(t)
				g.Eventually(func(g Gomega) {
					// team-b's objects first, then team-a's: the controller
					// writes team-b's only once team-a's are gone, and never
					// writes team-a's again, so team-a's seen after team-b's
					// were both live at once. (The other order counts a
					// handover between two reads as an overlap: the reads of
					// several kinds take longer than the controller does.)
					b := len(writtenFor(g, claim))
					a := len(writtenFor(g, owner))
					if a > 0 && b > 0 {
						// Not an Eventually-retry: a violation fails at once.
						t.Fatalf("team-a's %d and team-b's %d Istio objects are live together for %s", a, b, host)
					}
					g.Expect(readyOf(g, client.ObjectKeyFromObject(claim)).Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
					g.Expect(destinationNamespaces(route(g, publicGateway, host, "/"))).To(ConsistOf(teamB))
				}, eventually, 20*time.Millisecond).Should(Succeed())
			})
			if i == 0 {
				t.Run("team-a's APIRule, still held by the foreign finalizer, no longer has Portico's", func(t *testing.T) {
					r := &gatewayv1alpha1.APIRule{}
					NewWithT(t).Expect(admin.Get(ctx, client.ObjectKeyFromObject(owner), r)).To(Succeed())
					NewWithT(t).Expect(r.Finalizers).To(Equal([]string{holdFinalizer}))
				})
				removeFinalizers(t, owner)
			}
		})
	}
}

func addFinalizer(t *testing.T, obj client.Object) {
	t.Helper()
	update(t, admin, obj, func(o client.Object) { o.SetFinalizers(append(o.GetFinalizers(), holdFinalizer)) })
	t.Cleanup(func() { removeFinalizers(t, obj) })
}

// removeFinalizers removes the foreign finalizers (a deleted APIRule then
// goes, once the controller has removed its own).
func removeFinalizers(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool {
			return f == holdFinalizer || f == metav1.FinalizerDeleteDependents
		}))
		return client.IgnoreNotFound(admin.Update(context.Background(), obj))
	}, eventually, poll).Should(Succeed())
}

// Reserved hosts are reserved everywhere: the default gateway's health host
// on any gateway, since any Gateway may select the default gateway's pods.
func TestTheHealthHostIsReservedOnEveryGateway(t *testing.T) {
	useDefaultGateway(t)
	for i, gw := range []struct{ what, gateway string }{
		{"the administrator's shared gateway", publicGateway},
		{"a Gateway of team-b's own that selects the ingress pods", teamB + "/own-ingress"},
	} {
		t.Run("team-b claiming it on "+gw.what, func(t *testing.T) {
			if i == 1 {
				create(t, bob, istioGateway(teamB, "own-ingress", map[string]string{"istio": "ingressgateway"}))
			}
			claim := claimHost(t, fmt.Sprintf("health-elsewhere-%d", i), healthHost, gw.gateway)
			wait := followUp(t.Run("is refused with HostReserved", func(t *testing.T) {
				c := expectRefused(t, claim, gatewayv1alpha1.ReasonHostReserved)
				NewWithT(t).Expect(c.Message).To(ContainSubstring("health check"))
			}))
			t.Run("no Istio object is written for it, and the health check answers alone", func(t *testing.T) {
				NewWithT(t).Eventually(func(g Gomega) {
					g.Expect(writtenFor(g, claim)).To(BeEmpty())
					expectHealthAnswered(g)
					g.Expect(route(g, gw.gateway, healthHost, "/")).To(BeNil())
				}, wait, poll).Should(Succeed())
			})
		})
	}
}

// Hosts the administrator gives a namespace (spec.apiRules.ownedHosts) are
// its own: no other namespace can claim them, however early, so the owner
// can delete and re-create its APIRules (the way to change hosts) without
// losing a name, and no exact name under its wildcard blocks the wildcard.
func TestOwnedHostsCannotBeSquatted(t *testing.T) {
	giveHosts(t, teamA, "store.owned.example", "*.mall.owned.example")

	t.Run("team-b claiming an owned name before team-a has any APIRule", func(t *testing.T) {
		claim := claimHost(t, "squat-store", "store.owned.example", publicGateway)
		wait := followUp(t.Run("is refused with HostNotPermitted", func(t *testing.T) {
			expectRefused(t, claim, gatewayv1alpha1.ReasonHostNotPermitted)
		}))
		t.Run("its status names nothing of team-a", func(t *testing.T) { expectNoLeak(t, claim, teamA) })
		t.Run("no Istio object is written for it", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, claim)).To(BeEmpty()) }, wait, poll).Should(Succeed())
		})

		first := ownHost(t, "store", "store.owned.example")
		t.Run("team-a's later APIRule is applied over team-b's older claim", func(t *testing.T) {
			expectOnlyTeamARoutes(t, "store.owned.example", eventually)
		})
		t.Run("team-a deletes and re-creates its APIRule (to change its hosts): it keeps the name", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(alice.Delete(context.Background(), first)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(first), &gatewayv1alpha1.APIRule{}))
			}, eventually, poll).Should(BeTrue())
			g.Consistently(func(g Gomega) {
				g.Expect(readyOf(g, client.ObjectKeyFromObject(claim)).Reason).To(Equal(gatewayv1alpha1.ReasonHostNotPermitted))
				g.Expect(writtenFor(g, claim)).To(BeEmpty())
			}, 2*time.Second, poll).Should(Succeed(), "team-b's waiting claim took the name while team-a's APIRule was gone")
			moved := apiRule(teamA, "store-v2", "store.owned.example", publicGateway, backend("", "store"), protectedAPI()...)
			moved.Spec.Hosts = append(moved.Spec.Hosts, "checkout.owned.example")
			create(t, alice, moved)
			expectReason(t, moved, gatewayv1alpha1.ReasonApplied)
			expectOnlyTeamARoutes(t, "store.owned.example", eventually)
		})
	})

	t.Run("team-b's exact name waiting under team-a's owned wildcard", func(t *testing.T) {
		claim := claimHost(t, "squat-mall", "shoes.mall.owned.example", publicGateway)
		expectRefused(t, claim, gatewayv1alpha1.ReasonHostNotPermitted)
		time.Sleep(1100 * time.Millisecond) // team-b's claim is older by a second
		create(t, alice, service(teamA, "mall"))
		wildcard := apiRule(teamA, "mall", "*.mall.owned.example", publicGateway, backend("", "mall"), noAuth("/*"))
		create(t, alice, wildcard)
		t.Run("does not block the wildcard", func(t *testing.T) { expectReason(t, wildcard, gatewayv1alpha1.ReasonApplied) })
		t.Run("every name under it goes to team-a", func(t *testing.T) {
			expectOnlyTeamARoutes(t, "shoes.mall.owned.example", eventually)
		})
	})

	t.Run("team-b's wildcard reaching an owned name", func(t *testing.T) {
		grantWildcard(t, "*.owned.example", teamB)
		claim := claimHost(t, "squat-wild", "*.owned.example", publicGateway)
		expectRefused(t, claim, gatewayv1alpha1.ReasonHostNotPermitted)
		t.Run("no Istio object is written for it", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, claim)).To(BeEmpty()) }, eventually, poll).Should(Succeed())
		})
	})
}

// giveHosts is the administrator giving host names to a namespace, until
// the test ends.
func giveHosts(t *testing.T, namespace string, names ...string) {
	t.Helper()
	changeGrants(t, func(s *operatorv1alpha1.APIRulesSpec) {
		for _, n := range names {
			s.OwnedHosts = append(s.OwnedHosts, operatorv1alpha1.HostOwnership{Host: n, Namespaces: []string{namespace}})
		}
	}, func(s *operatorv1alpha1.APIRulesSpec) {
		s.OwnedHosts = slices.DeleteFunc(s.OwnedHosts, func(o operatorv1alpha1.HostOwnership) bool { return slices.Contains(names, o.Host) })
	})
}

// Class 3 under churn: grant, route, withdraw, delete and re-create with
// the same name, round after round. A status that says Applied for the
// APIRule's generation always comes with its VirtualService, controlled by
// that very APIRule; once a deleted APIRule is gone, nothing it wrote is
// left.
func TestConsentUnderChurn(t *testing.T) {
	t.Parallel()
	const rounds = 50
	ctx := context.Background()
	svc := service(teamA, "churn", consentingTo(teamB))
	create(t, alice, svc)
	setConsent := func(t *testing.T, on bool) {
		update(t, alice, svc, func(s *corev1.Service) {
			s.Annotations = nil
			if on {
				consentingTo(teamB)(s)
			}
		})
	}
	for round := range rounds {
		ok := t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			g := NewWithT(t)
			setConsent(t, true)
			rule := apiRule(teamB, "churn", "churn.b.example", publicGateway, backend(teamA, "churn"), noAuth("/*"))
			g.Expect(bob.Create(ctx, rule)).To(Succeed())
			expectAppliedWithItsObjects(t, rule)

			setConsent(t, false)
			g.Eventually(func(g Gomega) {
				g.Expect(readyOf(g, client.ObjectKeyFromObject(rule)).Reason).To(Equal(gatewayv1alpha1.ReasonReferenceNotPermitted))
				g.Expect(writtenFor(g, rule)).To(BeEmpty())
			}, eventually, 50*time.Millisecond).Should(Succeed())

			setConsent(t, true)
			expectAppliedWithItsObjects(t, rule)

			g.Expect(bob.Delete(ctx, rule)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(rule), &gatewayv1alpha1.APIRule{}))
			}, eventually, 20*time.Millisecond).Should(BeTrue())
			// At once, not eventually: the APIRule goes only after its objects.
			g.Expect(writtenFor(g, rule)).To(BeEmpty(), "the deleted APIRule's objects outlive it")
		})
		if !ok {
			break
		}
	}
}

// expectAppliedWithItsObjects waits for Applied for the APIRule's current
// generation and checks, in the same look, that its VirtualService exists
// and is controlled by this very APIRule (by UID).
func expectAppliedWithItsObjects(t *testing.T, rule *gatewayv1alpha1.APIRule) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		current := &gatewayv1alpha1.APIRule{}
		g.Expect(admin.Get(context.Background(), client.ObjectKeyFromObject(rule), current)).To(Succeed())
		c := readyOf(g, client.ObjectKeyFromObject(rule))
		if c.Reason != gatewayv1alpha1.ReasonApplied {
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
			return
		}
		var vss networkingv1.VirtualServiceList
		g.Expect(admin.List(context.Background(), &vss, client.MatchingLabels{labelAPIRule: rule.Name, labelAPIRuleNamespace: rule.Namespace})).To(Succeed())
		if len(vss.Items) != 1 || !metav1.IsControlledBy(vss.Items[0], current) {
			t.Fatalf("APIRule %s/%s (uid %s) says Applied for generation %d, but its VirtualServices are %v",
				rule.Namespace, rule.Name, current.UID, current.Generation, controllersOf(vss.Items))
		}
	}, eventually, 20*time.Millisecond).Should(Succeed())
}

func controllersOf(vss []*networkingv1.VirtualService) []string {
	out := []string{}
	for _, vs := range vss {
		owner := "none"
		if ref := metav1.GetControllerOf(vs); ref != nil {
			owner = string(ref.UID)
		}
		out = append(out, vs.Name+" (controller "+owner+")")
	}
	return out
}
