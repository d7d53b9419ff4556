package topology

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ingress = map[string]string{"istio": "ingressgateway"}
	public  = Gateway{Namespace: "istio-system", Name: "public", Selector: ingress}
	orders  = APIRule{Namespace: "shop", Name: "orders", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{
		{Path: "/orders/*", NoAuth: ptr.To(true)},
		{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
	}}
	bucket = gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}}
)

func policy(ns, name string, age int, kind gatewayv1alpha1.TargetKind, target string, opts ...func(*Policy)) Policy {
	p := Policy{Namespace: ns, Name: name, Created: t0.Add(time.Duration(age) * time.Minute), Spec: gatewayv1alpha1.RateLimitSpec{
		TargetRef: gatewayv1alpha1.TargetReference{Kind: kind, Name: target}, Local: bucket, Enforce: ptr.To(true),
	}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func world(policies ...Policy) Input {
	return Input{Gateways: []Gateway{public}, APIRules: []APIRule{orders}, Policies: policies, GatewaysKnown: true, APIRulesKnown: true}
}

func id(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// patchesOf returns the patches as plain JSON for assertions.
func patchesOf(g Gomega, out Output) []map[string]any {
	g.Expect(out.EnvoyFilters).To(HaveLen(1))
	raw, err := json.Marshal(&out.EnvoyFilters[0].Spec)
	g.Expect(err).NotTo(HaveOccurred())
	var spec struct {
		ConfigPatches []map[string]any `json:"configPatches"`
	}
	g.Expect(json.Unmarshal(raw, &spec)).To(Succeed())
	return spec.ConfigPatches
}

func TestSeveralPoliciesOneGateway(t *testing.T) {
	g := NewWithT(t)
	out := Compute(world(
		policy("istio-system", "whole-gateway", 0, gatewayv1alpha1.TargetGateway, "public"),
		policy("shop", "orders-api", 1, gatewayv1alpha1.TargetAPIRule, "orders"),
	))
	g.Expect(out.Verdicts).To(HaveLen(2))
	for _, v := range out.Verdicts {
		g.Expect(v.Enforced()).To(BeTrue(), v.Message)
		g.Expect(v.EnvoyFilter).To(Equal("istio-system/" + EnvoyFilterName("istio-system", ingress)))
	}
	ef := out.EnvoyFilters[0]
	g.Expect(ef.Namespace).To(Equal("istio-system"))
	g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(ingress))
	g.Expect(ef.Labels).To(HaveKeyWithValue(LabelManagedBy, ManagedBy))

	patches := patchesOf(g, out)
	g.Expect(patches).To(HaveLen(3), "one listener filter, one route patch per APIRule rule")
	g.Expect(patches[0]["applyTo"]).To(Equal("HTTP_FILTER"))
	filter := patches[0]["patch"].(map[string]any)["value"].(map[string]any)
	g.Expect(filter["name"]).To(Equal("envoy.filters.http.local_ratelimit"))
	cfg := filter["typed_config"].(map[string]any)
	g.Expect(cfg["type_url"]).To(Equal("type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"))
	value := cfg["value"].(map[string]any)
	g.Expect(value["token_bucket"]).To(Equal(map[string]any{"max_tokens": 100.0, "tokens_per_fill": 10.0, "fill_interval": "1s"}))
	g.Expect(value["filter_enforced"].(map[string]any)["default_value"]).To(Equal(map[string]any{"numerator": 100.0, "denominator": "HUNDRED"}))

	var routes []string
	for _, p := range patches[1:] {
		g.Expect(p["applyTo"]).To(Equal("HTTP_ROUTE"))
		match := p["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)["route"].(map[string]any)
		routes = append(routes, match["name"].(string))
		perRoute := p["patch"].(map[string]any)["value"].(map[string]any)["typed_per_filter_config"].(map[string]any)
		g.Expect(perRoute).To(HaveKey("envoy.filters.http.local_ratelimit"))
	}
	g.Expect(routes).To(ConsistOf(
		gatewayv1alpha1.RouteName("shop", "orders", orders.Rules[0]),
		gatewayv1alpha1.RouteName("shop", "orders", orders.Rules[1])))
}

func TestConflictOldestWins(t *testing.T) {
	g := NewWithT(t)
	newer := policy("shop", "newer", 5, gatewayv1alpha1.TargetAPIRule, "orders")
	older := policy("shop", "older", 1, gatewayv1alpha1.TargetAPIRule, "orders", func(p *Policy) { p.Spec.Local.MaxTokens = 7 })
	out := Compute(world(newer, older))

	g.Expect(out.Verdicts[id("shop", "older")].Enforced()).To(BeTrue())
	loser := out.Verdicts[id("shop", "newer")]
	g.Expect(loser.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
	g.Expect(loser.Message).To(ContainSubstring("already limited by the older RateLimit shop/older"))

	for _, p := range patchesOf(g, out)[1:] {
		perRoute := p["patch"].(map[string]any)["value"].(map[string]any)["typed_per_filter_config"].(map[string]any)
		bucket := perRoute["envoy.filters.http.local_ratelimit"].(map[string]any)["value"].(map[string]any)["token_bucket"].(map[string]any)
		g.Expect(bucket["max_tokens"]).To(Equal(7.0), "the older policy's bucket is enforced")
	}

	// Same age: namespace/name decides, deterministically.
	a := policy("istio-system", "a", 1, gatewayv1alpha1.TargetGateway, "public")
	b := policy("istio-system", "b", 1, gatewayv1alpha1.TargetGateway, "public")
	out = Compute(world(b, a))
	g.Expect(out.Verdicts[id("istio-system", "a")].Enforced()).To(BeTrue())
	g.Expect(out.Verdicts[id("istio-system", "b")].Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
}

func TestDeletingPoliciesShrinksAndRemovesTheFilter(t *testing.T) {
	g := NewWithT(t)
	gw := policy("istio-system", "gw", 0, gatewayv1alpha1.TargetGateway, "public")
	api := policy("shop", "api", 1, gatewayv1alpha1.TargetAPIRule, "orders")
	g.Expect(patchesOf(g, Compute(world(gw, api)))).To(HaveLen(3))

	withoutAPI := patchesOf(g, Compute(world(gw)))
	g.Expect(withoutAPI).To(HaveLen(1))

	withoutGateway := patchesOf(g, Compute(world(api)))
	g.Expect(withoutGateway).To(HaveLen(3))
	inert := withoutGateway[0]["patch"].(map[string]any)["value"].(map[string]any)["typed_config"].(map[string]any)["value"].(map[string]any)
	g.Expect(inert).To(Equal(map[string]any{"stat_prefix": statPrefix}), "without a gateway-wide limit the listener filter is inert")

	g.Expect(Compute(world()).EnvoyFilters).To(BeEmpty(), "no policy, no EnvoyFilter")
}

func TestTargetsNotFound(t *testing.T) {
	tests := map[string]struct {
		input   Input
		message string
	}{
		"missing APIRule": {
			input:   world(policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "nope")),
			message: "APIRule shop/nope not found",
		},
		"missing gateway": {
			input:   world(policy("shop", "p", 0, gatewayv1alpha1.TargetGateway, "public")),
			message: "Istio gateway shop/public not found",
		},
		"APIRule on a missing gateway": {
			input: Input{APIRules: []APIRule{orders}, GatewaysKnown: true, APIRulesKnown: true,
				Policies: []Policy{policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "orders")}},
			message: "Istio gateway istio-system/public of APIRule shop/orders not found",
		},
		"Gateway CRD not installed": {
			input:   Input{Policies: []Policy{policy("istio-system", "p", 0, gatewayv1alpha1.TargetGateway, "public")}, APIRulesKnown: true},
			message: "gateways.networking.istio.io) is not installed",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := Compute(tc.input)
			g.Expect(out.EnvoyFilters).To(BeEmpty())
			for _, v := range out.Verdicts {
				g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonTargetNotFound))
				g.Expect(v.Message).To(ContainSubstring(tc.message))
			}
		})
	}
}

func TestGatewaysSharingAWorkloadShareOneFilter(t *testing.T) {
	g := NewWithT(t)
	in := world(
		policy("istio-system", "a", 0, gatewayv1alpha1.TargetGateway, "public"),
		policy("istio-system", "b", 1, gatewayv1alpha1.TargetGateway, "internal"),
	)
	in.Gateways = append(in.Gateways, Gateway{Namespace: "istio-system", Name: "internal", Selector: ingress})
	out := Compute(in)
	g.Expect(out.EnvoyFilters).To(HaveLen(1))
	g.Expect(out.Verdicts[id("istio-system", "b")].Reason).To(Equal(gatewayv1alpha1.ReasonConflicted),
		"both gateways are one workload: its gateway-wide scope has one owner")
}

func TestDescriptorsAndOptions(t *testing.T) {
	g := NewWithT(t)
	p := policy("istio-system", "gw", 0, gatewayv1alpha1.TargetGateway, "public", func(p *Policy) {
		p.Spec.Enforce = ptr.To(false)
		p.Spec.ResponseHeaders = ptr.To(true)
		p.Spec.Descriptors = []gatewayv1alpha1.Descriptor{
			{Path: "/login", Bucket: &gatewayv1alpha1.TokenBucket{MaxTokens: 5, TokensPerFill: 5, FillInterval: metav1.Duration{Duration: time.Minute}}},
			{Header: &gatewayv1alpha1.HeaderMatch{Name: "x-tenant", Value: "free"}},
		}
	})
	patches := patchesOf(g, Compute(world(p)))
	g.Expect(patches).To(HaveLen(2))
	g.Expect(patches[1]["applyTo"]).To(Equal("VIRTUAL_HOST"))

	cfg := patches[0]["patch"].(map[string]any)["value"].(map[string]any)["typed_config"].(map[string]any)["value"].(map[string]any)
	g.Expect(cfg["filter_enforced"].(map[string]any)["default_value"].(map[string]any)["numerator"]).To(Equal(0.0), "enforce: false is shadow mode")
	g.Expect(cfg["enable_x_ratelimit_headers"]).To(Equal("DRAFT_VERSION_03"))
	descriptors := cfg["descriptors"].([]any)
	g.Expect(descriptors).To(HaveLen(2))
	g.Expect(descriptors[0].(map[string]any)["token_bucket"]).To(Equal(map[string]any{"max_tokens": 5.0, "tokens_per_fill": 5.0, "fill_interval": "60s"}))
	g.Expect(descriptors[1].(map[string]any)["token_bucket"].(map[string]any)["max_tokens"]).To(Equal(100.0), "a descriptor without a bucket uses spec.local")

	limits := patches[1]["patch"].(map[string]any)["value"].(map[string]any)["rate_limits"].([]any)
	first := limits[0].(map[string]any)["actions"].([]any)[0].(map[string]any)["header_value_match"].(map[string]any)
	g.Expect(first["descriptor_value"]).To(Equal("d0"))
	g.Expect(first["headers"]).To(Equal([]any{map[string]any{"name": ":path", "string_match": map[string]any{"prefix": "/login"}}}))
}

func TestComputeIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	in := world(
		policy("shop", "api", 1, gatewayv1alpha1.TargetAPIRule, "orders"),
		policy("istio-system", "gw", 0, gatewayv1alpha1.TargetGateway, "public"),
	)
	first, _ := json.Marshal(Compute(in).EnvoyFilters)
	in.Policies[0], in.Policies[1] = in.Policies[1], in.Policies[0]
	second, _ := json.Marshal(Compute(in).EnvoyFilters)
	g.Expect(string(second)).To(Equal(string(first)))
	g.Expect(networkingv1alpha3.EnvoyFilter_HTTP_FILTER.String()).To(Equal("HTTP_FILTER"))
}
