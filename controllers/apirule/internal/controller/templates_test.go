package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// APIRules with path templates become Ready in both modes, with live
// objects equal to the translation (regular expression routes, templates
// unchanged in the access policy) that stay unwritten once Ready.
func TestPathTemplatesAreApplied(t *testing.T) {
	createService(t, "templates")
	createGatewayAPIGateway(t, "templates-edge")
	items := porticov1alpha1.Rule{Path: "/orders/{*}/items", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}
	files := porticov1alpha1.Rule{Path: "/files/{**}", NoAuth: ptr.To(true)}
	createAPIRule(t, "templates", "templates", health, items, files)
	createRouteAPIRule(t, "templates-route", "templates", "templates-edge", health, items, files)
	selectors := map[types.NamespacedName]map[string]string{{Namespace: ns, Name: "templates"}: {"app": "templates"}}
	g := NewWithT(t)
	g.Eventually(func(g Gomega) { answer(g, "templates-route", metav1.ConditionTrue, "Accepted") }, eventually).Should(Succeed())
	for _, name := range []string{"templates", "templates-route"} {
		convergedAndQuiet(g, name, selectors)
	}
	vs := &networkingv1.VirtualService{}
	get(g, "templates", vs)
	g.Expect(vs.Spec.Http).To(ContainElement(HaveField("Match", ContainElement(HaveField("Uri.GetRegex()", `^/orders/[^/]+/items$`)))))
	route := &gwapiv1.HTTPRoute{}
	get(g, "templates-route", route)
	g.Expect(route.Spec.Rules).To(ContainElement(HaveField("Matches", ContainElement(HaveField("Path.Value", ptr.To(`^/files/.*$`))))))
	ap := &securityv1.AuthorizationPolicy{}
	get(g, "templates", ap)
	var paths []string
	for _, r := range ap.Spec.Rules {
		paths = append(paths, r.To[0].Operation.Paths...)
	}
	g.Expect(paths).To(ConsistOf("/health", "/orders/{*}/items", "/files/{**}"), "the access policy keeps Istio's templates")
}
