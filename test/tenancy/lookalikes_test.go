package tenancy

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// lookAlikeMeta is the metadata of an object team-b writes in its own
// namespace to pass for one Portico wrote for team-a's APIRule: Portico's
// labels naming it, and team-b's finalizer to hold it in deletion.
func lookAlikeMeta(rule *gatewayv1alpha1.APIRule, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: teamB, Name: name, Finalizers: []string{holdFinalizer}, Labels: map[string]string{
		"app.kubernetes.io/managed-by": "apirule-controller", labelAPIRule: rule.Name, labelAPIRuleNamespace: rule.Namespace,
	}}
}

// Labels are not ownership. team-b writes, in its own namespace, objects
// that carry Portico's labels naming team-a's APIRule, each held by
// team-b's finalizer. Before round 3 the controller took them for team-a's
// (outside the APIRule's namespace it trusted labels): it deleted them
// and then waited for them, so team-a's APIRule stayed Terminating, its
// hosts claimed, for as long as team-b kept its finalizer.
func TestALookAlikeCannotHoldAnotherTenantsAPIRule(t *testing.T) {
	for i, kind := range []string{"VirtualService", "AuthorizationPolicy", "RequestAuthentication", "HTTPRoute"} {
		t.Run("a "+kind+" of team-b labelled for team-a's APIRule", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			name := fmt.Sprintf("held-%d", i)
			create(t, alice, service(teamA, name))
			rule := apiRule(teamA, name, name+".a.example", publicGateway, backend("", name), noAuth("/*"))
			create(t, alice, rule)
			expectReason(t, rule, gatewayv1alpha1.ReasonApplied)

			var lookAlike client.Object
			switch kind {
			case "VirtualService":
				lookAlike = &networkingv1.VirtualService{ObjectMeta: lookAlikeMeta(rule, name)}
			case "AuthorizationPolicy":
				lookAlike = &securityv1.AuthorizationPolicy{ObjectMeta: lookAlikeMeta(rule, name)}
			case "RequestAuthentication":
				lookAlike = &securityv1.RequestAuthentication{ObjectMeta: lookAlikeMeta(rule, name)}
			case "HTTPRoute":
				lookAlike = &gatewayapiv1.HTTPRoute{ObjectMeta: lookAlikeMeta(rule, name)}
			}
			create(t, bob, lookAlike)
			t.Cleanup(func() { removeFinalizers(t, lookAlike) })

			g.Expect(alice.Delete(ctx, rule)).To(Succeed())
			t.Run("team-a's APIRule goes, its own objects with it", func(t *testing.T) {
				NewWithT(t).Eventually(func(g Gomega) {
					err := admin.Get(ctx, client.ObjectKeyFromObject(rule), &gatewayv1alpha1.APIRule{})
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the APIRule is still there (Terminating): %v", err)
				}, eventually, poll).Should(Succeed())
			})
			t.Run("team-b's object is left alone: not deleted, not changed", func(t *testing.T) {
				g := NewWithT(t)
				got := lookAlike.DeepCopyObject().(client.Object)
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(lookAlike), got)).To(Succeed())
				g.Expect(got.GetDeletionTimestamp()).To(BeNil(), "the controller deleted team-b's %s", kind)
				g.Expect(got.GetResourceVersion()).To(Equal(lookAlike.GetResourceVersion()), "the controller changed team-b's %s", kind)
			})
			t.Run("team-a is told, without learning where", func(t *testing.T) {
				g := NewWithT(t)
				g.Eventually(func(g Gomega) {
					var list eventsv1.EventList
					g.Expect(admin.List(ctx, &list, client.InNamespace(teamA))).To(Succeed())
					var found *eventsv1.Event
					for i := range list.Items {
						e := &list.Items[i]
						if e.Regarding.UID == rule.UID && e.Reason == gatewayv1alpha1.EventLookAlikeIgnored {
							found = e
						}
					}
					g.Expect(found).NotTo(BeNil(), "no %s Event on the APIRule", gatewayv1alpha1.EventLookAlikeIgnored)
					g.Expect(found.Note).To(ContainSubstring("1 object"))
					g.Expect(found.Note).NotTo(Or(ContainSubstring(teamB), ContainSubstring(name+" ")), "names team-b's object")
				}, eventually, poll).Should(Succeed())
			})
		})
	}
}

// An APIRule's own object that someone else's finalizer holds is still
// waited for (its hosts stay claimed:
// TestATerminatingOwnerKeepsItsHostsUntilItsObjectsAreGone); objects the
// controller did not write are not, even in the APIRule's namespace: a
// labelled policy team-a wrote there itself is never deleted.
func TestALookAlikeInTheAPIRulesNamespaceIsNeverDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	create(t, alice, service(teamA, "self-held"))
	rule := apiRule(teamA, "self-held", "self-held.a.example", publicGateway, backend("", "self-held"), noAuth("/*"))
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
	m := lookAlikeMeta(rule, "self-held-extra")
	m.Namespace, m.Finalizers = teamA, nil
	extra := &securityv1.AuthorizationPolicy{ObjectMeta: m}
	create(t, alice, extra)
	g.Expect(alice.Delete(ctx, rule)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(rule), &gatewayv1alpha1.APIRule{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, eventually, poll).Should(Succeed())
	got := &securityv1.AuthorizationPolicy{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(extra), got)).To(Succeed(), "the controller deleted an object it did not write")
	g.Expect(got.DeletionTimestamp).To(BeNil())
}

// HostShared cannot be hidden by labels. team-b's HTTPRoute for team-a's
// host on the shared Gateway carries Portico's labels naming team-a's
// APIRule; before round 3 the controller took it for team-a's own route
// and reported NoForeignRoute.
func TestALabelledForeignRouteIsStillReportedAsShared(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ensureSharedGateway(t)
	create(t, alice, service(teamA, "gw-labelled"))
	rule := onGatewayAPI(apiRule(teamA, "gw-labelled", "gw-labelled.a.example", "", backend("", "gw-labelled"), noAuth("/health")))
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonRoutePending)
	m := lookAlikeMeta(rule, "gw-labelled-hijack")
	m.Finalizers = nil
	hijack := &gatewayapiv1.HTTPRoute{
		ObjectMeta: m,
		Spec: gatewayapiv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayapiv1.CommonRouteSpec{ParentRefs: []gatewayapiv1.ParentReference{{
				Namespace: ptr.To(gatewayapiv1.Namespace(rootNamespace)), Name: sharedGatewayAPIGateway,
			}}},
			Hostnames: []gatewayapiv1.Hostname{"gw-labelled.a.example"},
		},
	}
	create(t, bob, hijack)
	var shared *metav1.Condition
	g.Eventually(func(g Gomega) {
		r := &gatewayv1alpha1.APIRule{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(rule), r)).To(Succeed())
		shared = meta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionHostShared)
		g.Expect(shared).NotTo(BeNil())
		g.Expect(shared.Reason).To(Equal(gatewayv1alpha1.ReasonForeignRoute))
	}, eventually, poll).Should(Succeed())
	g.Expect(shared.Message).NotTo(Or(ContainSubstring(teamB), ContainSubstring("hijack")), "names nothing of another namespace")
	// The labels do not make the route team-a's in any other way either:
	// its spec is never rewritten, and it is never deleted.
	g.Consistently(func(g Gomega) {
		got := &gatewayapiv1.HTTPRoute{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(hijack), got)).To(Succeed())
		g.Expect(got.DeletionTimestamp).To(BeNil())
		g.Expect(got.Spec.Hostnames).To(Equal(hijack.Spec.Hostnames))
	}, 2*time.Second, poll).Should(Succeed())
}

// The ratelimit controller, too, takes labels for a claim. team-b writes
// in its own namespace an EnvoyFilter with the controller's labels naming
// team-a's namespace; before round 3 the controller took every labelled
// filter for its own and deleted this one as no longer needed (or would
// have retired it with the controller).
func TestALookAlikeEnvoyFilterIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	lookAlike := &networkingv1alpha3.EnvoyFilter{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "limits-of-team-a", Labels: map[string]string{
		"app.kubernetes.io/managed-by": "ratelimit-controller", "gateway.portico.dev/ratelimit-namespace": teamA,
	}}}
	create(t, bob, lookAlike)
	// A RateLimit of team-a starts a pass over the world of filters.
	create(t, alice, service(teamA, "limited-lookalike"))
	rule := apiRule(teamA, "limited-lookalike", "limited-lookalike.a.example", publicGateway, backend("", "limited-lookalike"), noAuth("/*"))
	create(t, alice, rule)
	limit := rateLimit(teamA, "limited-lookalike", gatewayv1alpha1.TargetAPIRule, "limited-lookalike", 10)
	create(t, alice, limit)
	g.Eventually(func(g Gomega) {
		r := &gatewayv1alpha1.RateLimit{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(limit), r)).To(Succeed())
		g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation))
	}, eventually, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &networkingv1alpha3.EnvoyFilter{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(lookAlike), got)).To(Succeed(), "the ratelimit controller deleted team-b's EnvoyFilter")
		g.Expect(got.ResourceVersion).To(Equal(lookAlike.ResourceVersion), "the ratelimit controller changed team-b's EnvoyFilter")
	}, 3*time.Second, poll).Should(Succeed())
}
