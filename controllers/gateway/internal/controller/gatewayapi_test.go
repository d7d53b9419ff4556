package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func liveGatewayAPIGateway(t *testing.T) *gwapiv1.Gateway {
	t.Helper()
	gw := &gwapiv1.Gateway{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: operatorv1alpha1.DefaultGatewayName}, gw)).To(Succeed())
	return gw
}

// The default gateway as a Gateway API Gateway: the real CRDs admit what
// the controller writes, the status waits for the Gateway's controller to
// program it, nothing is written twice, and switching back restores the
// Istio Gateway.
func TestDefaultGatewayAsGatewayAPIGateway(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(start)
	r := newReconciler(clk)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"portico.dev/apis": "true"}}
	setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "apis.example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{RouteNamespaces: selector}})

	t.Run("the Gateway and its redirect route are written, the Istio Gateway goes", func(t *testing.T) {
		g := NewWithT(t)
		st := reconcileOnce(t, r)
		g.Expect(st.GatewayAPI).To(BeTrue())
		g.Expect(st.Gateway).To(Equal(ns + "/" + operatorv1alpha1.DefaultGatewayName))
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayPending))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayNotProgrammed), st.Message)
		live := liveGatewayAPIGateway(t)
		g.Expect(string(live.Spec.GatewayClassName)).To(Equal("istio"))
		g.Expect(live.Spec.Listeners).To(HaveLen(2))
		https := live.Spec.Listeners[0]
		g.Expect(string(https.Name)).To(Equal("https"))
		g.Expect(string(*https.Hostname)).To(Equal("*.apis.example.com"))
		g.Expect(string(https.TLS.CertificateRefs[0].Name)).To(Equal(SelfSignedSecret))
		g.Expect(*https.AllowedRoutes.Namespaces.From).To(Equal(gwapiv1.NamespacesFromSelector))
		g.Expect(https.AllowedRoutes.Namespaces.Selector.MatchLabels).To(Equal(selector.MatchLabels))
		g.Expect(*live.Spec.Listeners[1].AllowedRoutes.Namespaces.From).To(Equal(gwapiv1.NamespacesFromSame), "only the redirect on HTTP")
		route := &gwapiv1.HTTPRoute{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: RedirectRoute}, route)).To(Succeed())
		g.Expect(route.Spec.Rules[0].Filters[0].RequestRedirect.Scheme).To(Equal(ptrTo("https")))
		g.Expect(gone(&networkingv1.Gateway{}, operatorv1alpha1.DefaultGatewayName)).To(BeTrue())
		g.Expect(gone(&networkingv1.VirtualService{}, HealthVirtualService)).To(BeTrue())
	})

	t.Run("Ready once the Gateway's controller programs it; nothing is rewritten", func(t *testing.T) {
		g := NewWithT(t)
		live := liveGatewayAPIGateway(t)
		live.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Invalid", Message: "no address yet",
			ObservedGeneration: live.Generation, LastTransitionTime: metav1.Now()}}
		g.Expect(k8sClient.Status().Update(ctx, live)).To(Succeed())
		st := reconcileOnce(t, r)
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayNotProgrammed))
		g.Expect(st.Message).To(ContainSubstring("no address yet"))

		live = liveGatewayAPIGateway(t)
		live.Status.Conditions[0].Status, live.Status.Conditions[0].Reason = metav1.ConditionTrue, "Programmed"
		g.Expect(k8sClient.Status().Update(ctx, live)).To(Succeed())
		st = reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
		g.Expect(st.Message).To(ContainSubstring("Gateway API Gateway"))
		g.Expect(liveGatewayAPIGateway(t).Generation).To(Equal(int64(1)), "written once: the live Gateway compares equal")
		route := &gwapiv1.HTTPRoute{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: RedirectRoute}, route)).To(Succeed())
		g.Expect(route.Generation).To(Equal(int64(1)))
	})

	t.Run("back to an Istio Gateway", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "apis.example.com"})
		st := reconcileOnce(t, r)
		g.Expect(st.GatewayAPI).To(BeFalse())
		g.Expect(liveGateway(t).Spec.Servers).To(HaveLen(2))
		g.Expect(gone(&gwapiv1.Gateway{}, operatorv1alpha1.DefaultGatewayName)).To(BeTrue())
		g.Expect(gone(&gwapiv1.HTTPRoute{}, RedirectRoute)).To(BeTrue())
	})
	setGateway(t, nil)
	reconcileOnce(t, r)
}

func ptrTo[T any](v T) *T { return &v }
