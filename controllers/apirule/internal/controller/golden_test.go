package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// TestGoldenIsWhatTheControllerWrites: once an APIRule is Ready, its live
// objects and status are Golden's (what the controllers' benchmark writes
// for its floor), in both modes.
func TestGoldenIsWhatTheControllerWrites(t *testing.T) {
	createService(t, "golden")
	createGatewayAPIGateway(t, "golden-edge")
	createAPIRule(t, "golden", "golden", health, orders)
	createRouteAPIRule(t, "golden-route", "golden", "golden-edge", health, orders)
	selectors := map[types.NamespacedName]map[string]string{{Namespace: ns, Name: "golden"}: {"app": "golden"}}
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "golden").Status).To(Equal(metav1.ConditionTrue))
	}, eventually).Should(Succeed())
	// The Gateway answers the route as soon as it is written.
	g.Eventually(func(g Gomega) { answer(g, "golden-route", metav1.ConditionTrue, "Accepted") }, eventually).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "golden-route").Status).To(Equal(metav1.ConditionTrue))
	}, eventually).Should(Succeed())

	for _, name := range []string{"golden", "golden-route"} {
		rule := &porticov1alpha1.APIRule{}
		get(g, name, rule)
		objs, statuses, err := Golden(rule, nil, selectors)
		g.Expect(err).NotTo(HaveOccurred())
		for _, want := range objs {
			live := want.DeepCopyObject().(client.Object)
			get(g, want.GetName(), live)
			g.Expect(live.GetLabels()).To(Equal(want.GetLabels()), "%T %s", want, want.GetName())
			g.Expect(live.GetOwnerReferences()).To(Equal(want.GetOwnerReferences()), "%T %s", want, want.GetName())
			g.Expect(upToDate(want, live)).To(BeTrue(), "%T %s has the golden spec", want, want.GetName())
		}
		g.Expect(withoutTimes(rule.Status)).To(Equal(withoutTimes(statuses[len(statuses)-1])), name)
		// One status in either mode: a new route's first status waits
		// for the Gateway's answer.
		g.Expect(statuses).To(HaveLen(1))
	}
	// Neither mode wrote the other's route.
	g.Expect(gone("golden-route", &networkingv1.VirtualService{})()).To(BeTrue())
	g.Expect(gone("golden", &gwapiv1.HTTPRoute{})()).To(BeTrue())
}

// withoutTimes drops the conditions' transition times, which no two
// writers share.
func withoutTimes(s porticov1alpha1.APIRuleStatus) porticov1alpha1.APIRuleStatus {
	s = *s.DeepCopy()
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return s
}
