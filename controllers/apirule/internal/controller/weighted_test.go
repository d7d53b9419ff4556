package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// An APIRule that splits a JWT path between two Services becomes Ready in
// both modes, with the weights on the route and the rule's access policy
// and RequestAuthentication on both backends, named as for any backend.
func TestWeightedBackendsAreApplied(t *testing.T) {
	createService(t, "split-stable")
	createService(t, "split-canary")
	createGatewayAPIGateway(t, "split-edge")
	canary := orders
	canary.Backends = []porticov1alpha1.WeightedBackend{
		{Service: porticov1alpha1.ServiceReference{Name: "split-stable", Port: 8080}, Weight: 90},
		{Service: porticov1alpha1.ServiceReference{Name: "split-canary", Port: 8080}, Weight: 10},
	}
	createAPIRule(t, "split", "split-stable", health, canary)
	createRouteAPIRule(t, "split-route", "split-stable", "split-edge", health, canary)
	selectors := map[types.NamespacedName]map[string]string{
		{Namespace: ns, Name: "split-stable"}: {"app": "split-stable"},
		{Namespace: ns, Name: "split-canary"}: {"app": "split-canary"},
	}
	g := NewWithT(t)
	g.Eventually(func(g Gomega) { answer(g, "split-route", metav1.ConditionTrue, "Accepted") }, eventually).Should(Succeed())
	for _, name := range []string{"split", "split-route"} {
		convergedAndQuiet(g, name, selectors)
		for backend, policy := range map[string]string{"split-stable": name, "split-canary": name + "-split-canary"} {
			ap := &securityv1.AuthorizationPolicy{}
			get(g, policy, ap)
			g.Expect(ap.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": backend}))
			g.Expect(ap.Spec.Rules).To(ContainElement(HaveField("To", ContainElement(HaveField("Operation.Paths", ConsistOf("/orders/*"))))))
			ra := &securityv1.RequestAuthentication{}
			get(g, policy, ra)
			g.Expect(ra.Spec.JwtRules).To(ConsistOf(HaveField("Issuer", "https://idp.example.com")))
		}
	}
	vs := &networkingv1.VirtualService{}
	get(g, "split", vs)
	g.Expect(vs.Spec.Http).To(ContainElement(HaveField("Route", ConsistOf(
		And(HaveField("Destination.Host", HavePrefix("split-stable.")), HaveField("Weight", int32(90))),
		And(HaveField("Destination.Host", HavePrefix("split-canary.")), HaveField("Weight", int32(10))),
	))))
	route := &gwapiv1.HTTPRoute{}
	get(g, "split-route", route)
	g.Expect(route.Spec.Rules).To(ContainElement(HaveField("BackendRefs", ConsistOf(
		And(HaveField("Name", gwapiv1.ObjectName("split-stable")), HaveField("Weight", HaveValue(Equal(int32(90))))),
		And(HaveField("Name", gwapiv1.ObjectName("split-canary")), HaveField("Weight", HaveValue(Equal(int32(10))))),
	))))
}
