//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// apiRuleFeatureSpecs are the story of a team that moves its storefront
// from Kyma's APIRule: it sets headers and a cookie on the requests its
// backend receives, serves an old path by rewriting it onto the new one,
// sends beta testers (a header) to a canary and splits the rest of the
// traffic between the stable backend and the canary. Requests go from a
// client pod through the gateway stand-in, which routes, rewrites, sets
// headers and splits as Envoy does from the VirtualService the apirule
// controller wrote; the backends echo the path and, asked with
// X-Echo-Headers, the headers they received.
//
// Call it inside the Portico Describe after the routing spec (it needs
// gatewayIP's stand-in and the orders backend in namespace shop).
func apiRuleFeatureSpecs(gatewayIP *string) {
	const host = "storefront.example.com"
	It("routes a storefront APIRule with a weighted split, a header match, request headers, a cookie, a rewrite, a security response header and removed headers through the gateway", func(ctx SpecContext) {
		if !target.RealPods() {
			Skip("kwok runs no containers")
		}
		By("running a canary backend beside orders")
		createOrExisting(ctx, agentDeployment("shop", "orders-canary", map[string]string{"app": "orders-canary"}, "default", "backend", "--name", "orders-canary"))
		createOrExisting(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "orders-canary", Namespace: "shop"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "orders-canary"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		})

		storefront := &gatewayv1alpha1.APIRule{
			ObjectMeta: metav1.ObjectMeta{Name: "storefront", Namespace: "shop"},
			Spec: gatewayv1alpha1.APIRuleSpec{
				Hosts:   []gatewayv1alpha1.Hostname{host},
				Gateway: "istio-system/public",
				Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
				Rules: []gatewayv1alpha1.Rule{
					{
						// Half of the catalog's traffic goes to the canary.
						Path: "/catalog/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true),
						Backends: []gatewayv1alpha1.WeightedBackend{
							{Service: gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080}, Weight: 50},
							{Service: gatewayv1alpha1.ServiceReference{Name: "orders-canary", Port: 8080}, Weight: 50},
						},
						Request: &gatewayv1alpha1.RequestModifier{
							Headers: map[string]gatewayv1alpha1.RequestHeaderValue{"x-api-version": "2"},
							Cookies: map[string]gatewayv1alpha1.CookieValue{"region": "eu"},
						},
					},
					{
						// Beta testers (x-beta: true) always reach the canary.
						Path: "/catalog/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true),
						Service: &gatewayv1alpha1.ServiceReference{Name: "orders-canary", Port: 8080},
						Match:   &gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{{Name: "x-beta", Exact: "true"}}},
						Request: &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{"x-route": "beta"}},
					},
					{
						// The old API path, hardened on the way: a security
						// header on every answer, the backend's name
						// (X-Backend) hidden, a debug header dropped.
						Path: "/v1/items/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true),
						Rewrite: &gatewayv1alpha1.Rewrite{Prefix: "/items/"},
						Request: &gatewayv1alpha1.RequestModifier{RemoveHeaders: []gatewayv1alpha1.RemovedRequestHeader{"x-debug"}},
						Response: &gatewayv1alpha1.ResponseModifier{
							Set:    map[string]gatewayv1alpha1.ResponseHeaderValue{"strict-transport-security": "max-age=31536000"},
							Remove: []gatewayv1alpha1.ResponseHeaderName{"x-backend"},
						},
					},
				},
			},
		}
		Expect(k8sClient.Create(ctx, storefront)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, storefront) })
		Eventually(func(g Gomega) {
			got := &gatewayv1alpha1.APIRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(storefront), got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gatewayv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		}, timeout, interval).Should(Succeed())

		By("sending requests from client pods")
		url := "http://" + *gatewayIP
		answers := requestFromPod(ctx, map[string][]string{
			// Each backend of the split receives some of the requests, with
			// the headers and the cookie the rule sets, replacing what the
			// client sent (each get retries until its backend answers).
			"stable": {url + "/catalog/shoes", "--host", host, "--header", "X-Echo-Headers=1", "--header", "X-Api-Version=1", "--header", "Cookie=session=forged",
				"--expect-body", "orders GET /catalog/shoes", "--interval", "100ms"},
			"canary": {url + "/catalog/shoes", "--host", host, "--header", "X-Echo-Headers=1", "--header", "X-Api-Version=1",
				"--expect-body", "orders-canary GET /catalog/shoes", "--interval", "100ms"},
			// The header match sends beta testers to the beta rule: its
			// header, never the split's.
			"beta": {url + "/catalog/shoes", "--host", host, "--header", "X-Echo-Headers=1", "--header", "X-Beta=true", "--expect-body", "X-Route: beta"},
			// /v1/items/7 reaches the pods as /items/7.
			"rewrite": {url + "/v1/items/7", "--host", host, "--expect-body", "orders GET /items/7"},
			// ... without the client's X-Debug, and answers with the
			// security header and without X-Backend.
			"hardened": {url + "/v1/items/7", "--host", host, "--header", "X-Echo-Headers=1", "--header", "X-Debug=1",
				"--expect-body", "orders GET /items/7", "--expect-header", "Strict-Transport-Security=max-age=31536000", "--expect-header", "X-Backend="},
		})
		for _, name := range []string{"stable", "canary"} {
			Expect(answers[name]).To(ContainSubstring("X-Api-Version: 2"), name)
			Expect(answers[name]).To(ContainSubstring("Cookie: region=eu"), name)
			Expect(answers[name]).NotTo(ContainSubstring("session=forged"), name)
		}
		Expect(answers["beta"]).To(ContainSubstring("200 orders-canary GET /catalog/shoes"))
		Expect(answers["beta"]).NotTo(ContainSubstring("X-Api-Version"), "the split's headers are not set on the beta route")
		Expect(answers["rewrite"]).To(ContainSubstring("200 orders GET /items/7"))
		Expect(answers["hardened"]).To(ContainSubstring("Strict-Transport-Security: max-age=31536000"))
		Expect(answers["hardened"]).To(ContainSubstring("X-Echo-Headers: 1"), "the backend echoed what it received")
		Expect(answers["hardened"]).NotTo(ContainSubstring("X-Debug"), "the gateway removed the client's X-Debug")

		By("sending 40 requests without the beta header: the split reaches both backends, the beta rule none")
		tally := requestFromPod(ctx, map[string][]string{
			"split": {url + "/catalog/shoes", "--host", host, "--loop", "--timeout", "8s", "--interval", "200ms", "--expect-body", "orders-canary GET"},
		})
		// The loop counts the canary's answers as expected and the stable
		// backend's as a body mismatch: both must have answered, and
		// nothing else may have happened.
		var last trafficTally
		for _, line := range strings.Split(tally["split"], "\n") {
			if rest, ok := strings.CutPrefix(line, "traffic "); ok {
				Expect(json.Unmarshal([]byte(rest), &last)).To(Succeed(), line)
			}
		}
		Expect(last.OK).To(BeNumerically(">", 0), "the canary answered: %s", tally["split"])
		Expect(last.Errors).To(HaveKey("body"), "the stable backend answered: %s", tally["split"])
		Expect(last.Failed).To(Equal(last.Errors["body"]), "no request failed otherwise: %s", tally["split"])
	})
}
