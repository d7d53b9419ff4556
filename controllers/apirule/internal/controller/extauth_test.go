package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// grantAuthorizers creates the APIGateway with the authorizer grants.
func grantAuthorizers(t *testing.T, grants ...operatorv1alpha1.ExtAuthProviderGrant) *operatorv1alpha1.APIGateway {
	t.Helper()
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName},
		Spec: operatorv1alpha1.APIGatewaySpec{APIRules: &operatorv1alpha1.APIRulesSpec{ExtAuthProviders: grants}}}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), gw)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), gw) })
	return gw
}

func extAuthRule(path, authorizer string) porticov1alpha1.Rule {
	return porticov1alpha1.Rule{Path: path, ExtAuth: &porticov1alpha1.ExtAuth{Authorizers: []string{authorizer}}}
}

// An extAuth rule writes a CUSTOM policy for its granted authorizer, in
// both modes; an ungranted authorizer writes nothing; a withdrawn grant
// removes what was written.
func TestExtAuthNeedsAGrant(t *testing.T) {
	ctx := context.Background()
	createService(t, "ext")
	createService(t, "ext-route")
	createGatewayAPIGateway(t, "ext-edge")
	gw := grantAuthorizers(t, operatorv1alpha1.ExtAuthProviderGrant{Name: "ext-authz", Namespaces: []string{ns}},
		operatorv1alpha1.ExtAuthProviderGrant{Name: "team-b-authz", Namespaces: []string{otherNS}})

	createAPIRule(t, "ext", "ext", health, extAuthRule("/orders/*", "ext-authz"))
	createRouteAPIRule(t, "ext-route", "ext-route", "ext-edge", extAuthRule("/*", "ext-authz"))
	g := NewWithT(t)
	g.Eventually(func(g Gomega) { answer(g, "ext-route", metav1.ConditionTrue, "Accepted") }, eventually).Should(Succeed())
	for _, name := range []string{"ext", "ext-route"} {
		expectReason(t, ns, name, porticov1alpha1.ReasonApplied)
		custom := &securityv1.AuthorizationPolicy{}
		get(g, name+"-extauth", custom)
		g.Expect(custom.Spec.Action).To(Equal(securityv1beta1.AuthorizationPolicy_CUSTOM))
		g.Expect(custom.Spec.GetProvider().GetName()).To(Equal("ext-authz"))
		g.Expect(custom.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": name}))
	}

	t.Run("an authorizer granted to another namespace is refused, nothing written", func(t *testing.T) {
		createAPIRule(t, "ext-borrowed", "ext", extAuthRule("/reports", "team-b-authz"))
		c := expectReason(t, ns, "ext-borrowed", porticov1alpha1.ReasonAuthorizerNotPermitted)
		NewWithT(t).Expect(c.Message).To(ContainSubstring("external authorizer team-b-authz is not granted to namespace " + ns))
		NewWithT(t).Expect(gone("ext-borrowed", &networkingv1.VirtualService{})()).To(BeTrue())
		NewWithT(t).Expect(gone("ext-borrowed-extauth", &securityv1.AuthorizationPolicy{})()).To(BeTrue())
		NewWithT(t).Expect(gone("ext-borrowed", &securityv1.AuthorizationPolicy{})()).To(BeTrue())
	})

	t.Run("another APIRule on the same pods without the authorizer is an AccessConflict", func(t *testing.T) {
		createAPIRule(t, "ext-bypass", "ext", porticov1alpha1.Rule{Path: "/orders/admin", NoAuth: ptr.To(true)})
		c := expectReason(t, ns, "ext-bypass", porticov1alpha1.ReasonAccessConflict)
		NewWithT(t).Expect(c.Message).To(ContainSubstring("to authorizer ext-authz"))
		NewWithT(t).Expect(gone("ext-bypass", &securityv1.AuthorizationPolicy{})()).To(BeTrue())
	})

	t.Run("when the grant is withdrawn the objects are removed", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			live := &operatorv1alpha1.APIGateway{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gw), live); err != nil {
				return err
			}
			live.Spec.APIRules.ExtAuthProviders = live.Spec.APIRules.ExtAuthProviders[1:]
			return k8sClient.Update(ctx, live)
		}, eventually).Should(Succeed())
		for _, name := range []string{"ext", "ext-route"} {
			expectReason(t, ns, name, porticov1alpha1.ReasonAuthorizerNotPermitted)
			g.Eventually(gone(name+"-extauth", &securityv1.AuthorizationPolicy{}), eventually).Should(BeTrue())
			g.Eventually(gone(name, &securityv1.AuthorizationPolicy{}), eventually).Should(BeTrue())
		}
		g.Eventually(gone("ext", &networkingv1.VirtualService{}), eventually).Should(BeTrue())
		g.Eventually(gone("ext-route", &gwapiv1.HTTPRoute{}), eventually).Should(BeTrue())
	})
}

// Removing a rule's extAuth removes its CUSTOM policy: the controller
// prunes what is no longer desired.
func TestExtAuthPolicyIsPruned(t *testing.T) {
	createService(t, "ext-prune")
	grantAuthorizers(t, operatorv1alpha1.ExtAuthProviderGrant{Name: "ext-authz", Namespaces: []string{"*"}})
	createAPIRule(t, "ext-prune", "ext-prune", extAuthRule("/orders/*", "ext-authz"))
	expectReason(t, ns, "ext-prune", porticov1alpha1.ReasonApplied)
	g := NewWithT(t)
	get(g, "ext-prune-extauth", &securityv1.AuthorizationPolicy{})
	updateAPIRule(t, "ext-prune", func(r *porticov1alpha1.APIRule) {
		r.Spec.Rules[0].ExtAuth, r.Spec.Rules[0].NoAuth = nil, ptr.To(true)
	})
	g.Eventually(gone("ext-prune-extauth", &securityv1.AuthorizationPolicy{}), eventually).Should(BeTrue())
	expectReason(t, ns, "ext-prune", porticov1alpha1.ReasonApplied)
}

// accessSets pairs each ALLOW policy with the CUSTOM policy named after it,
// also when two backends of one APIRule select the same pods.
func TestAccessSets(t *testing.T) {
	policy := func(apirule, name string, action securityv1beta1.AuthorizationPolicy_Action) *securityv1.AuthorizationPolicy {
		ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{plan.LabelAPIRule: apirule, plan.LabelAPIRuleNamespace: ns}}}
		ap.Spec.Action = action
		ap.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "orders"}}
		return ap
	}
	allow, custom := securityv1beta1.AuthorizationPolicy_ALLOW, securityv1beta1.AuthorizationPolicy_CUSTOM
	a := policy("a", "a", allow)
	aCustom := policy("a", "a-extauth", custom)
	aAdmin := policy("a", "a-orders-admin", allow) // another Service of the same pods, without extAuth
	b := policy("b", "b", allow)
	stray := policy("b", "a-extauth", custom) // b's, though named like a's
	got := accessSets([]*securityv1.AuthorizationPolicy{aCustom, a, aAdmin, b, stray})
	NewWithT(t).Expect(got).To(ConsistOf(
		access.Access{Allow: a, Custom: aCustom},
		access.Access{Allow: aAdmin},
		access.Access{Allow: b},
		access.Access{Custom: stray},
	))
}
