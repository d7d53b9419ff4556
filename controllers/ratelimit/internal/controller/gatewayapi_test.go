package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// gatewayAPIGateway is a Gateway API Gateway of class istio with an HTTP
// listener on port 80, admitted by the real Gateway API CRDs.
func gatewayAPIGateway(ns, name string) *gatewayapiv1.Gateway {
	return &gatewayapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gatewayapiv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gatewayapiv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayapiv1.HTTPProtocolType},
			{Name: "tcp", Port: 9000, Protocol: gatewayapiv1.TCPProtocolType},
		}},
	}
}

// gatewayAPIPodLabels are the labels Istio's deployment template gives the
// pods of a Gateway API Gateway.
func gatewayAPIPodLabels(name string) map[string]string {
	return map[string]string{
		gatewayv1alpha1.GatewayNameLabel:               name,
		"gateway.networking.k8s.io/gateway-class-name": "istio",
		"gateway.istio.io/managed":                     "istio.io-gateway-controller",
	}
}

func gatewayAPILimit(ns, name, gateway string, maxTokens int64) *gatewayv1alpha1.RateLimit {
	l := rateLimit(ns, name, gatewayv1alpha1.TargetGateway, gateway, maxTokens)
	l.Spec.TargetRef.Group = gatewayv1alpha1.GatewayAPIGroup
	return l
}

// conditionsOf reads a RateLimit's Ready, Accepted and Enforced conditions
// as type -> status/reason, checking each describes the current generation.
func conditionsOf(g Gomega, ns, name string) map[string]string {
	l := &gatewayv1alpha1.RateLimit{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	out := map[string]string{}
	for _, t := range []string{gatewayv1alpha1.ConditionReady, gatewayv1alpha1.ConditionAccepted, gatewayv1alpha1.ConditionEnforced} {
		c := meta.FindStatusCondition(l.Status.Conditions, t)
		g.Expect(c).NotTo(BeNil(), "condition %s", t)
		g.Expect(c.ObservedGeneration).To(Equal(l.Generation))
		out[t] = string(c.Status) + "/" + c.Reason
	}
	return out
}

func TestGatewayAPIGatewayTarget(t *testing.T) {
	g := NewWithT(t)
	selector := map[string]string{gatewayv1alpha1.GatewayNameLabel: "edge"}
	limit := gatewayAPILimit("team-a", "edge-wide", "edge", 40)
	create(t, limit)

	// No Gateway yet: not accepted.
	g.Eventually(func(g Gomega) {
		g.Expect(conditionsOf(g, "team-a", "edge-wide")).To(Equal(map[string]string{
			"Ready": "False/TargetNotFound", "Accepted": "False/TargetNotFound", "Enforced": "False/NotEnforced",
		}))
	}, eventually).Should(Succeed())

	// The Gateway, but Istio has not run its pods: accepted, not enforced.
	create(t, gatewayAPIGateway("team-a", "edge"))
	g.Eventually(func(g Gomega) {
		g.Expect(conditionsOf(g, "team-a", "edge-wide")).To(Equal(map[string]string{
			"Ready": "False/NotEnforced", "Accepted": "True/Accepted", "Enforced": "False/NotEnforced",
		}))
	}, eventually).Should(Succeed())

	// Its pods, and a same-named Gateway's pods in team-b: the filter binds
	// to Istio's label in team-a, where it reaches team-a's pods only.
	create(t, gatewayAPIGateway("team-b", "edge"))
	gatewayPod(t, "team-b", "edge-istio-b", gatewayAPIPodLabels("edge"))
	gatewayPod(t, "team-a", "edge-istio-a", gatewayAPIPodLabels("edge"))
	g.Eventually(func(g Gomega) {
		g.Expect(conditionsOf(g, "team-a", "edge-wide")).To(Equal(map[string]string{
			"Ready": "True/Enforced", "Accepted": "True/Accepted", "Enforced": "True/Enforced",
		}))
		ef, patches := envoyFilterIn(g, "team-a", "team-a", selector)
		g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(selector))
		g.Expect(ef.Spec.TargetRefs).To(BeEmpty(), "a workloadSelector, not targetRefs (matched correctly only since Istio 1.27)")
		cfg := patches[0]["patch"].(map[string]any)["value"].(map[string]any)["typed_config"].(map[string]any)["value"].(map[string]any)
		g.Expect(cfg["token_bucket"].(map[string]any)["max_tokens"]).To(BeEquivalentTo(40))
		l := &gatewayv1alpha1.RateLimit{}
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(limit), l)).To(Succeed())
		g.Expect(l.Status.EnvoyFilters).To(Equal([]string{filterKey("team-a", "team-a", selector).String()}))
	}, eventually).Should(Succeed())
	g.Expect(managedFiltersSelecting(g, selector)).To(ConsistOf(filterKey("team-a", "team-a", selector).String()),
		"nothing is written for team-b's pods")
}

func TestAPIRuleInHTTPRouteModeTarget(t *testing.T) {
	g := NewWithT(t)
	selector := map[string]string{gatewayv1alpha1.GatewayNameLabel: "shared"}
	create(t, gatewayAPIGateway("gateways", "shared"))
	gatewayPod(t, "gateways", "shared-istio", gatewayAPIPodLabels("shared"))
	rule := apiRule("shop", "catalog", "", "/catalog/*", "/health")
	rule.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Namespace: "gateways", Name: "shared"}
	create(t, rule)
	create(t, rateLimit("shop", "catalog", gatewayv1alpha1.TargetAPIRule, "catalog", 30))

	g.Eventually(func(g Gomega) {
		g.Expect(conditionsOf(g, "shop", "catalog")).To(HaveKeyWithValue("Enforced", "True/Enforced"))
		_, patches := envoyFilterIn(g, "istio-system", "shop", selector)
		var routes []string
		for _, p := range patches[1:] {
			vhost := p["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)
			routes = append(routes, vhost["name"].(string)+"|"+vhost["route"].(map[string]any)["name"].(string))
		}
		var want []string
		for _, r := range rule.Spec.Rules {
			want = append(want, string(rule.Spec.Hosts[0])+":80|"+gatewayv1alpha1.HTTPRouteRuleName(rule.Namespace, rule.Name, r))
		}
		g.Expect(routes).To(ConsistOf(want), "the rules' routes in the APIRule's virtual host on the HTTP listener")
	}, eventually).Should(Succeed())
}
