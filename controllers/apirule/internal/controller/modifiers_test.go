package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// APIRules with retries, request headers and cookies and rewrites become
// Ready in both modes, their live objects are what the translation wants
// (so the API server's defaulting does not make the controller write them
// again and again), and they stay unwritten once Ready.
func TestRequestModifiersAreApplied(t *testing.T) {
	createService(t, "modifiers")
	createGatewayAPIGateway(t, "modifiers-edge")
	request := &porticov1alpha1.RequestModifier{
		Headers: map[string]porticov1alpha1.RequestHeaderValue{"x-api-version": "2"},
		Cookies: map[string]porticov1alpha1.CookieValue{"region": "eu"},
	}
	public := porticov1alpha1.Rule{Path: "/public/*", NoAuth: ptr.To(true), Request: request,
		Rewrite: &porticov1alpha1.Rewrite{Prefix: "/v2/public/"}}
	status := porticov1alpha1.Rule{Path: "/status", NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Path: "/health"}}
	withRetries := public
	withRetries.Retries = &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: &metav1.Duration{Duration: time.Second}}
	createAPIRule(t, "modifiers", "modifiers", health, withRetries, status)
	createRouteAPIRule(t, "modifiers-route", "modifiers", "modifiers-edge", health, public, status)
	selectors := map[types.NamespacedName]map[string]string{{Namespace: ns, Name: "modifiers"}: {"app": "modifiers"}}
	g := NewWithT(t)
	g.Eventually(func(g Gomega) { answer(g, "modifiers-route", metav1.ConditionTrue, "Accepted") }, eventually).Should(Succeed())
	for _, name := range []string{"modifiers", "modifiers-route"} {
		convergedAndQuiet(g, name, selectors)
	}
	vs := &networkingv1.VirtualService{}
	get(g, "modifiers", vs)
	g.Expect(vs.Spec.Http).To(ContainElement(HaveField("Retries.RetryOn", "503")))
	route := &gwapiv1.HTTPRoute{}
	get(g, "modifiers-route", route)
	g.Expect(route.Spec.Rules).To(ContainElement(HaveField("Filters", ContainElement(HaveField("Type", gwapiv1.HTTPRouteFilterURLRewrite)))))
	ap := &securityv1.AuthorizationPolicy{}
	get(g, "modifiers", ap)
	var paths []string
	for _, r := range ap.Spec.Rules {
		paths = append(paths, r.To[0].Operation.Paths...)
	}
	g.Expect(paths).To(ConsistOf("/health", "/v2/public/*", "/health"), "the access policy allows the rewritten paths")
}
