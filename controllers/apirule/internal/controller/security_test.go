package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1api "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// A rule with its own Service reaches that Service's pods: they need their
// own AuthorizationPolicy and RequestAuthentication, else the rule's JWT is
// enforced nowhere.
func TestRuleWithItsOwnServiceIsProtected(t *testing.T) {
	g := NewWithT(t)
	createService(t, "split")
	createService(t, "split-reports")
	createAPIRule(t, "split", "split", health, porticov1alpha1.Rule{
		Path: "/reports/*", JWT: orders.JWT, Service: &porticov1alpha1.ServiceReference{Name: "split-reports", Port: 8080},
	})

	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "split")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonApplied), c.Message)

		ap := &securityv1.AuthorizationPolicy{}
		get(g, "split-split-reports", ap)
		g.Expect(ap.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "split-reports"}))
		g.Expect(ap.Spec.Rules).To(HaveLen(1))
		g.Expect(ap.Spec.Rules[0].To[0].Operation.Paths).To(Equal([]string{"/reports/*"}))
		g.Expect(ap.Spec.Rules[0].From[0].Source.RequestPrincipals).To(Equal([]string{"https://idp.example.com/*"}))
		g.Expect(ap.OwnerReferences).To(ConsistOf(HaveField("Name", "split")))
		ra := &securityv1.RequestAuthentication{}
		get(g, "split-split-reports", ra)
		g.Expect(ra.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "split-reports"}))
		g.Expect(ra.Spec.JwtRules).To(ConsistOf(HaveField("Issuer", "https://idp.example.com")))

		def := &securityv1.AuthorizationPolicy{}
		get(g, "split", def)
		g.Expect(def.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "split"}))
		g.Expect(def.Spec.Rules).To(HaveLen(1), "only /health is served by split")
	}, eventually).Should(Succeed())
	g.Expect(gone("split", &securityv1.RequestAuthentication{})()).To(BeTrue(), "no JWT rule routes to split")

	t.Run("a backend no rule routes to any more loses its policies", func(t *testing.T) {
		g := NewWithT(t)
		updateAPIRule(t, "split", func(r *porticov1alpha1.APIRule) { r.Spec.Rules = r.Spec.Rules[:1] })
		g.Eventually(gone("split-split-reports", &securityv1.AuthorizationPolicy{}), eventually).Should(BeTrue())
		g.Eventually(gone("split-split-reports", &securityv1.RequestAuthentication{}), eventually).Should(BeTrue())
	})
}

// Istio adds up a workload's ALLOW rules: a noAuth prefix would open a JWT
// path it covers. The API server rejects it when both rules name the same
// Service; the controller rejects what the API server cannot see.
func TestNoAuthPrefixOverJWTPathIsRejected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	api := porticov1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)}
	admin := porticov1alpha1.Rule{Path: "/api/admin", JWT: orders.JWT}

	createService(t, "covered")
	r := createAPIRule(t, "covered", "covered", api)
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "covered").Reason).To(Equal(porticov1alpha1.ReasonApplied))
	}, eventually).Should(Succeed())
	applied := &securityv1.AuthorizationPolicy{}
	get(g, "covered", applied)

	t.Run("by the API server when both rules use the default service", func(t *testing.T) {
		g := NewWithT(t)
		updated := r.DeepCopy()
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), updated)).To(Succeed())
		updated.Spec.Rules = append(updated.Spec.Rules, admin)
		g.Expect(k8sClient.Update(ctx, updated)).To(MatchError(ContainSubstring("a prefix rule covers another rule's path")))
	})

	t.Run("by the controller when the covered rule names the default service itself", func(t *testing.T) {
		g := NewWithT(t)
		explicit := admin
		explicit.Service = &porticov1alpha1.ServiceReference{Name: "covered", Port: 8080}
		updateAPIRule(t, "covered", func(r *porticov1alpha1.APIRule) { r.Spec.Rules = append(r.Spec.Rules, explicit) })
		g.Eventually(func(g Gomega) {
			c := readyCondition(g, "covered")
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonInvalidRule))
			g.Expect(c.Message).To(ContainSubstring("rule /api/* (noAuth) covers rule /api/admin"))
		}, eventually).Should(Succeed())
		ap := &securityv1.AuthorizationPolicy{}
		get(g, "covered", ap)
		g.Expect(ap.ResourceVersion).To(Equal(applied.ResourceVersion), "the live objects are left as they were")
		g.Expect(gone("covered", &securityv1.RequestAuthentication{})()).To(BeTrue())
	})
}

// The API server leaves pairs of rules in the jwt list form to the
// controller (comparing the nested lists of every pair would exceed its
// CEL budget): a prefix rule trusting one more issuer than the path it
// covers is refused here, and nothing is written.
func TestListFormPrefixOverJWTPathIsRejected(t *testing.T) {
	g := NewWithT(t)
	partners := &porticov1alpha1.JWTAuthentication{Authentications: []porticov1alpha1.JWTIssuer{
		{Issuer: orders.JWT.Issuer, JWKSURI: orders.JWT.JWKSURI},
		{Issuer: "https://partners.example.com", JWKSURI: "https://partners.example.com/keys", FromHeaders: []porticov1alpha1.JWTHeader{{Name: "x-partner-token"}}},
	}}
	createService(t, "listcovered")
	createAPIRule(t, "listcovered", "listcovered",
		porticov1alpha1.Rule{Path: "/api/*", JWT: partners},
		porticov1alpha1.Rule{Path: "/api/admin", JWT: orders.JWT})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "listcovered")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonInvalidRule))
		g.Expect(c.Message).To(ContainSubstring("rule /api/* (jwt issuers " + orders.JWT.Issuer + ",https://partners.example.com) covers rule /api/admin"))
	}, eventually).Should(Succeed())
	g.Expect(gone("listcovered", &securityv1.AuthorizationPolicy{})()).To(BeTrue())
	g.Expect(gone("listcovered", &securityv1.RequestAuthentication{})()).To(BeTrue())
}

// An administrator's policy that happens to have the APIRule's name is
// neither changed nor deleted; the APIRule reports the conflict.
func TestForeignObjectIsNeverTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	deny := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "takeover", Namespace: ns}}
	deny.Spec.Action = securityv1beta1api.AuthorizationPolicy_DENY
	deny.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "takeover"}}
	deny.Spec.Rules = []*securityv1beta1api.Rule{{From: []*securityv1beta1api.Rule_From{{Source: &securityv1beta1api.Source{NotNamespaces: []string{ns}}}}}}
	g.Expect(k8sClient.Create(ctx, deny, client.FieldOwner("admin"))).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, deny) })
	want := proto.Clone(&deny.Spec)

	createService(t, "takeover")
	r := createAPIRule(t, "takeover", "takeover", health)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "takeover")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonConflict))
		g.Expect(c.Message).To(ContainSubstring("AuthorizationPolicy shop/takeover exists"))
	}, eventually).Should(Succeed())

	unchanged := func(g Gomega) {
		live := &securityv1.AuthorizationPolicy{}
		get(g, "takeover", live)
		g.Expect(live.UID).To(Equal(deny.UID))
		g.Expect(live.Spec.Action).To(Equal(securityv1beta1api.AuthorizationPolicy_DENY))
		g.Expect(proto.Equal(&live.Spec, want)).To(BeTrue(), "spec changed: %v", &live.Spec)
		g.Expect(live.OwnerReferences).To(BeEmpty())
		g.Expect(live.Labels).To(BeEmpty())
	}
	unchanged(g)
	g.Expect(gone("takeover", &networkingv1.VirtualService{})()).To(BeTrue(), "nothing is written while in conflict")

	g.Expect(k8sClient.Delete(ctx, r)).To(Succeed())
	g.Eventually(gone("takeover", &porticov1alpha1.APIRule{}), eventually).Should(BeTrue())
	g.Consistently(unchanged, "2s").Should(Succeed(), "the administrator's policy outlives the APIRule")
}

// A Service in another namespace consents to APIRules of listed
// namespaces. Consent grants routing only: the APIRule writes no policy in
// the Service's namespace, and withdrawing consent removes the route.
func TestCrossNamespaceServiceNeedsConsent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createService(t, "xns")
	createServiceIn(t, otherNS, "xns-reports", nil)
	remote := porticov1alpha1.Rule{Path: "/reports/*", JWT: orders.JWT,
		Service: &porticov1alpha1.ServiceReference{Name: "xns-reports", Namespace: otherNS, Port: 8080}}
	createAPIRule(t, "xns", "xns", health, remote)
	const remoteName = ns + "-xns-xns-reports"
	consent := func(value string) {
		g.Eventually(func() error {
			svc := &corev1.Service{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: "xns-reports"}, svc); err != nil {
				return err
			}
			svc.Annotations = map[string]string{porticov1alpha1.AnnotationAllowedAPIRuleNamespaces: value}
			return k8sClient.Update(ctx, svc)
		}, eventually).Should(Succeed())
	}
	notPermitted := func(g Gomega) {
		c := readyCondition(g, "xns")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonReferenceNotPermitted))
		g.Expect(c.Message).To(ContainSubstring("service analytics/xns-reports does not exist or does not allow APIRules of namespace shop"))
	}

	g.Eventually(notPermitted, eventually).Should(Succeed())
	g.Expect(gone("xns", &networkingv1.VirtualService{})()).To(BeTrue(), "nothing is written without consent")
	g.Expect(gone("xns", &securityv1.AuthorizationPolicy{})()).To(BeTrue())

	t.Run("consent grants the route, and no policy in the Service's namespace", func(t *testing.T) {
		g := NewWithT(t)
		consent("team-x, " + ns)
		g.Eventually(func(g Gomega) {
			c := readyCondition(g, "xns")
			g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonApplied), c.Message)
			vs := &networkingv1.VirtualService{}
			get(g, "xns", vs)
			g.Expect(vs.Spec.Http).To(ContainElement(HaveField("Route", ContainElement(
				HaveField("Destination.Host", "xns-reports.analytics.svc.cluster.local")))))
		}, eventually).Should(Succeed())
		g.Expect(goneIn(otherNS, remoteName, &securityv1.AuthorizationPolicy{})()).To(BeTrue(), "the Service's namespace decides who calls its pods")
		g.Expect(goneIn(otherNS, remoteName, &securityv1.RequestAuthentication{})()).To(BeTrue())
		var aps securityv1.AuthorizationPolicyList
		g.Expect(k8sClient.List(ctx, &aps, client.InNamespace(otherNS))).To(Succeed())
		g.Expect(aps.Items).To(BeEmpty())
	})

	t.Run("withdrawing consent removes the route", func(t *testing.T) {
		g := NewWithT(t)
		consent("team-x")
		g.Eventually(notPermitted, eventually).Should(Succeed())
		g.Eventually(gone("xns", &networkingv1.VirtualService{}), eventually).Should(BeTrue())
		g.Eventually(gone("xns", &securityv1.AuthorizationPolicy{}), eventually).Should(BeTrue())
	})
}

// A foreign VirtualService with the APIRule's name exists only in the API
// server (not labelled, so never cached): the controller learns of it when
// its create fails, after it created the APIRule's policies. It writes
// nothing to the foreign object, deletes the policies again (no partial
// set stays behind) and reports the same Conflict as a check before
// writing would.
func TestForeignRouteFoundOnCreateUndoesThePass(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	foreign := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "lateral", Namespace: ns}}
	foreign.Spec.Hosts = []string{"lateral.internal"}
	foreign.Spec.Http = []*networkingv1alpha3.HTTPRoute{{Route: []*networkingv1alpha3.HTTPRouteDestination{{
		Destination: &networkingv1alpha3.Destination{Host: "elsewhere.other.svc.cluster.local"},
	}}}}
	g.Expect(k8sClient.Create(ctx, foreign, client.FieldOwner("admin"))).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, foreign) })

	createService(t, "lateral")
	createAPIRule(t, "lateral", "lateral", health, orders)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "lateral")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonConflict))
		g.Expect(c.Message).To(Equal("VirtualService shop/lateral exists and was not created for this APIRule: " +
			"it is left untouched, and nothing is written until it is removed or renamed"))
	}, eventually).Should(Succeed())

	nothingLeft := func(g Gomega) {
		live := &networkingv1.VirtualService{}
		get(g, "lateral", live)
		g.Expect(live.UID).To(Equal(foreign.UID))
		g.Expect(live.ResourceVersion).To(Equal(foreign.ResourceVersion), "the foreign VirtualService is never written")
		g.Expect(goneIn(ns, "lateral", &securityv1.AuthorizationPolicy{})()).To(BeTrue(), "the pass's AuthorizationPolicy is deleted again")
		g.Expect(goneIn(ns, "lateral", &securityv1.RequestAuthentication{})()).To(BeTrue(), "the pass's RequestAuthentication is deleted again")
	}
	g.Eventually(nothingLeft, eventually).Should(Succeed())
	g.Consistently(nothingLeft, "2s").Should(Succeed())

	// The foreign object goes: the next look (conflictRetry, or an edit of
	// the APIRule as here) applies the APIRule.
	g.Expect(k8sClient.Delete(ctx, foreign)).To(Succeed())
	updateAPIRule(t, "lateral", func(r *porticov1alpha1.APIRule) { r.Spec.Rules = r.Spec.Rules[:1] })
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "lateral").Reason).To(Equal(porticov1alpha1.ReasonApplied))
		vs := &networkingv1.VirtualService{}
		get(g, "lateral", vs)
		g.Expect(vs.UID).NotTo(Equal(foreign.UID))
	}, eventually).Should(Succeed())
}
