package topology

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Gateway API fixtures: team-a runs the Gateway API Gateway edge, the
// administrator a shared one in namespace gateways, and team-b a Gateway of
// the same name edge (Istio labels both Gateways' pods alike).
var (
	edgeAPI   = GatewayAPIGateway{Namespace: "team-a", Name: "edge", Ports: []int32{80, 443}}
	sharedAPI = GatewayAPIGateway{Namespace: "gateways", Name: "shared", Ports: []int32{443}}
	edgeOfB   = GatewayAPIGateway{Namespace: "team-b", Name: "edge", Ports: []int32{80}}
	edgePod   = Pod{Namespace: "team-a", Labels: map[string]string{gatewayv1alpha1.GatewayNameLabel: "edge", "gateway.networking.k8s.io/gateway-class-name": "istio"}}
	edgePodB  = Pod{Namespace: "team-b", Labels: map[string]string{gatewayv1alpha1.GatewayNameLabel: "edge", "gateway.networking.k8s.io/gateway-class-name": "istio"}}
	sharedPod = Pod{Namespace: "gateways", Labels: map[string]string{gatewayv1alpha1.GatewayNameLabel: "shared"}}
	checkoutA = APIRule{Namespace: "team-a", Name: "checkout", ParentRef: &types.NamespacedName{Namespace: "gateways", Name: "shared"},
		Hosts: []string{"checkout.a.example"}, Rules: []gatewayv1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}}}
	checkoutB = APIRule{Namespace: "team-b", Name: "checkout", ParentRef: &types.NamespacedName{Namespace: "gateways", Name: "shared"},
		Hosts: []string{"checkout.b.example"}, Rules: []gatewayv1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}}}
	edgeRule = APIRule{Namespace: "team-a", Name: "orders", ParentRef: &types.NamespacedName{Namespace: "team-a", Name: "edge"},
		Hosts: []string{"orders.a.example", "shop.a.example"}, Rules: []gatewayv1alpha1.Rule{
			{Path: "/orders/*", NoAuth: ptr.To(true)},
			{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
		}}
)

func gatewayAPIWorld(policies ...Policy) Input {
	return Input{
		GatewayAPIGateways: []GatewayAPIGateway{edgeAPI, sharedAPI, edgeOfB},
		APIRules:           []APIRule{checkoutA, checkoutB, edgeRule},
		Pods:               []Pod{edgePod, edgePodB, sharedPod},
		Policies:           policies,
		RootNamespace:      DefaultRootNamespace, GatewaysKnown: true, GatewayAPIGatewaysKnown: true, APIRulesKnown: true,
	}
}

// gatewayAPIPolicy targets the Gateway API Gateway name.
func gatewayAPIPolicy(ns, name string, age int, gateway string) Policy {
	p := policy(ns, name, age, gatewayv1alpha1.TargetGateway, gateway)
	p.Spec.TargetRef.Group = gatewayv1alpha1.GatewayAPIGroup
	return p
}

// routeKeys reads the routes an EnvoyFilter limits as <vhost>|<route name>.
func routeKeys(g Gomega, out Output, filter string) []string {
	var keys []string
	for _, ef := range out.EnvoyFilters {
		if ef.Namespace+"/"+ef.Name != filter {
			continue
		}
		g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed())
		for _, p := range patches(g, ef)[1:] {
			vhost := p["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)
			name, _ := vhost["name"].(string)
			keys = append(keys, name+"|"+vhost["route"].(map[string]any)["name"].(string))
		}
	}
	return keys
}

func TestGatewayAPITargets(t *testing.T) {
	edgeSelector := map[string]string{gatewayv1alpha1.GatewayNameLabel: "edge"}
	sharedSelector := map[string]string{gatewayv1alpha1.GatewayNameLabel: "shared"}
	rootFilter := func(tenant string) string {
		return "istio-system/" + EnvoyFilterName("istio-system", tenant, sharedSelector)
	}
	all, health := gatewayv1alpha1.HTTPRouteRuleName(edgeRule.Namespace, edgeRule.Name, edgeRule.Rules[0]), gatewayv1alpha1.HTTPRouteRuleName(edgeRule.Namespace, edgeRule.Name, edgeRule.Rules[1])
	anyPath := gatewayv1alpha1.HTTPRouteRuleName(checkoutA.Namespace, checkoutA.Name, checkoutA.Rules[0])
	tests := map[string]struct {
		in      Input
		limit   types.NamespacedName
		reason  string
		message string
		filter  string   // the enforcing filter, when enforced
		routes  []string // <vhost>|<route> of the filter's route patches
	}{
		"a gateway-wide limit binds to the Gateway's pods by Istio's label, in its namespace": {
			in:    gatewayAPIWorld(gatewayAPIPolicy("team-a", "edge-wide", 0, "edge")),
			limit: id("team-a", "edge-wide"), reason: gatewayv1alpha1.ReasonEnforced,
			message: "Gateway API gateway team-a/edge",
			filter:  "team-a/" + EnvoyFilterName("team-a", "team-a", edgeSelector),
		},
		"an Istio Gateway of the same name is not the target": {
			in: func() Input {
				in := gatewayAPIWorld(policy("team-a", "istio-edge", 0, gatewayv1alpha1.TargetGateway, "edge"))
				in.GatewayAPIGateways = nil
				return in
			}(),
			limit: id("team-a", "istio-edge"), reason: gatewayv1alpha1.ReasonTargetNotFound, message: "Istio gateway team-a/edge not found",
		},
		"a Gateway API Gateway is looked up in the RateLimit's own namespace only": {
			in:    gatewayAPIWorld(gatewayAPIPolicy("team-b", "steal", 0, "shared")),
			limit: id("team-b", "steal"), reason: gatewayv1alpha1.ReasonTargetNotFound, message: "Gateway API gateway team-b/shared not found",
		},
		"without the Gateway API's CRD the target cannot be found": {
			in: func() Input {
				in := gatewayAPIWorld(gatewayAPIPolicy("team-a", "edge-wide", 0, "edge"))
				in.GatewayAPIGatewaysKnown, in.GatewayAPIGateways = false, nil
				return in
			}(),
			limit: id("team-a", "edge-wide"), reason: gatewayv1alpha1.ReasonTargetNotFound,
			message: "the Gateway API's Gateway CRD (gateways.gateway.networking.k8s.io) is not installed",
		},
		"without pods of its own the Gateway is not limited, whoever else's pods carry the label": {
			in: func() Input {
				in := gatewayAPIWorld(gatewayAPIPolicy("team-a", "edge-wide", 0, "edge"))
				in.Pods = []Pod{edgePodB, sharedPod}
				return in
			}(),
			limit: id("team-a", "edge-wide"), reason: gatewayv1alpha1.ReasonNotEnforced,
			message: "no pod labelled gateway.networking.k8s.io/gateway-name=edge runs in namespace team-a",
		},
		"a name too long for a label is invalid": {
			in:    gatewayAPIWorld(gatewayAPIPolicy("team-a", "long", 0, strings.Repeat("g", 64))),
			limit: id("team-a", "long"), reason: gatewayv1alpha1.ReasonInvalid, message: "longer than 63 characters",
		},
		"an APIRule in HTTPRoute mode: its rules' routes in its own virtual hosts, per listener port": {
			in:    gatewayAPIWorld(policy("team-a", "orders", 0, gatewayv1alpha1.TargetAPIRule, "orders")),
			limit: id("team-a", "orders"), reason: gatewayv1alpha1.ReasonEnforced,
			message: "APIRule team-a/orders on Gateway API gateway team-a/edge",
			filter:  "team-a/" + EnvoyFilterName("team-a", "team-a", edgeSelector),
			routes: []string{
				"orders.a.example:443|" + health, "orders.a.example:80|" + health, "shop.a.example:443|" + health, "shop.a.example:80|" + health,
				"orders.a.example:443|" + all, "orders.a.example:80|" + all, "shop.a.example:443|" + all, "shop.a.example:80|" + all,
			},
		},
		"an APIRule on a shared Gateway API Gateway: the filter in Istio's root namespace": {
			in:    gatewayAPIWorld(policy("team-a", "checkout", 0, gatewayv1alpha1.TargetAPIRule, "checkout")),
			limit: id("team-a", "checkout"), reason: gatewayv1alpha1.ReasonEnforced,
			filter: rootFilter("team-a"), routes: []string{"checkout.a.example:443|" + anyPath},
		},
		"another tenant's rule of the same name on the same pods is another route": {
			in: gatewayAPIWorld(
				policy("team-b", "checkout", 0, gatewayv1alpha1.TargetAPIRule, "checkout"),
				policy("team-a", "checkout", 1, gatewayv1alpha1.TargetAPIRule, "checkout")),
			limit: id("team-a", "checkout"), reason: gatewayv1alpha1.ReasonEnforced,
			filter: rootFilter("team-a"), routes: []string{"checkout.a.example:443|" + anyPath},
		},
		"a gateway-wide limit and a route limit on the Gateway's pods conflict": {
			in: gatewayAPIWorld(
				gatewayAPIPolicy("team-a", "edge-wide", 0, "edge"),
				policy("team-a", "orders", 1, gatewayv1alpha1.TargetAPIRule, "orders")),
			limit: id("team-a", "orders"), reason: gatewayv1alpha1.ReasonConflicted, message: "already limited gateway-wide by the older RateLimit team-a/edge-wide",
		},
		"an APIRule's Gateway API Gateway without HTTP listeners has no routes to limit": {
			in: func() Input {
				in := gatewayAPIWorld(policy("team-a", "orders", 0, gatewayv1alpha1.TargetAPIRule, "orders"))
				in.GatewayAPIGateways[0].Ports = nil
				return in
			}(),
			limit: id("team-a", "orders"), reason: gatewayv1alpha1.ReasonNotEnforced, message: "has no HTTP or HTTPS listener",
		},
		"an APIRule's missing Gateway API Gateway": {
			in: func() Input {
				in := gatewayAPIWorld(policy("team-a", "checkout", 0, gatewayv1alpha1.TargetAPIRule, "checkout"))
				in.GatewayAPIGateways = []GatewayAPIGateway{edgeAPI}
				return in
			}(),
			limit: id("team-a", "checkout"), reason: gatewayv1alpha1.ReasonTargetNotFound,
			message: "Gateway API gateway gateways/shared of APIRule team-a/checkout not found",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := Compute(tc.in)
			v := out.Verdicts[tc.limit]
			g.Expect(v.Reason).To(Equal(tc.reason), v.Message)
			g.Expect(v.Message).To(ContainSubstring(tc.message))
			g.Expect(v.Accepted()).To(Equal(tc.reason == gatewayv1alpha1.ReasonEnforced || tc.reason == gatewayv1alpha1.ReasonNotEnforced))
			if tc.filter == "" {
				g.Expect(v.EnvoyFilters).To(BeEmpty())
				return
			}
			g.Expect(v.EnvoyFilters).To(Equal([]string{tc.filter}))
			g.Expect(routeKeys(g, out, tc.filter)).To(ConsistOf(tc.routes))
			g.Expect(checkInvariants(tc.in, out)).To(Succeed())
		})
	}
}

// TestGatewayAPIFilterReachesOnlyItsGatewaysPods: the filter of a
// gateway-wide limit selects Istio's label for the Gateway and lives in the
// Gateway's namespace, so the pods of another namespace's Gateway of the
// same name are not reached.
func TestGatewayAPIFilterReachesOnlyItsGatewaysPods(t *testing.T) {
	g := NewWithT(t)
	in := gatewayAPIWorld(gatewayAPIPolicy("team-a", "edge-wide", 0, "edge"), gatewayAPIPolicy("team-b", "edge-wide", 0, "edge"))
	out := Compute(in)
	g.Expect(out.EnvoyFilters).To(HaveLen(2))
	for _, ef := range out.EnvoyFilters {
		g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(map[string]string{gatewayv1alpha1.GatewayNameLabel: "edge"}))
		g.Expect(ef.Namespace).To(Equal(ef.Labels[LabelNamespace]), "each tenant's filter in its own namespace")
		g.Expect(readReach(in, podGroups(in.Pods), ef)).To(HaveLen(1))
	}
	for _, v := range out.Verdicts {
		g.Expect(v.Enforced()).To(BeTrue(), v.Message)
	}
	g.Expect(checkInvariants(in, out)).To(Succeed())
}
