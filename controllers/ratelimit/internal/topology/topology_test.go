package topology

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ingress = map[string]string{"istio": "ingressgateway"}
	// ingressPod carries more labels than the selector, as real pods do.
	ingressPod = Pod{Namespace: "istio-system", Labels: map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway"}}
	public     = Gateway{Namespace: "istio-system", Name: "public", Selector: ingress}
	orders     = APIRule{Namespace: "shop", Name: "orders", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{
		{Path: "/orders/*", NoAuth: ptr.To(true)},
		{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
	}}
	payments = APIRule{Namespace: "shop", Name: "payments", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{
		{Path: "/payments/*", NoAuth: ptr.To(true)},
	}}
	bucket = gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}}
)

func policy(ns, name string, age int, kind gatewayv1alpha1.TargetKind, target string, opts ...func(*Policy)) Policy {
	p := Policy{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Created: t0.Add(time.Duration(age) * time.Minute), Spec: gatewayv1alpha1.RateLimitSpec{
		TargetRef: gatewayv1alpha1.TargetReference{Kind: kind, Name: target}, Local: ptr.To(bucket), Enforce: ptr.To(true),
	}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// world is the common layout: the gateway and its pods in istio-system,
// Istio's root namespace.
func world(policies ...Policy) Input {
	return Input{
		Gateways: []Gateway{public}, APIRules: []APIRule{orders, payments}, Policies: policies, Pods: []Pod{ingressPod},
		RootNamespace: DefaultRootNamespace, GatewaysKnown: true, APIRulesKnown: true,
	}
}

func id(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// patches returns an EnvoyFilter's patches as plain JSON for assertions.
func patches(g Gomega, ef *networkingv1alpha3client.EnvoyFilter) []map[string]any {
	raw, err := json.Marshal(&ef.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	var spec struct {
		ConfigPatches []map[string]any `json:"configPatches"`
	}
	g.Expect(json.Unmarshal(raw, &spec)).To(Succeed())
	return spec.ConfigPatches
}

// patchesOf returns the patches of the only EnvoyFilter, after checking
// every EnvoyFilter is valid Envoy configuration.
func patchesOf(g Gomega, out Output) []map[string]any {
	g.Expect(out.EnvoyFilters).To(HaveLen(1))
	g.Expect(validateEnvoyFilter(out.EnvoyFilters[0], nil)).To(Succeed())
	return patches(g, out.EnvoyFilters[0])
}

func value(patch map[string]any) map[string]any {
	return patch["patch"].(map[string]any)["value"].(map[string]any)
}

func TestAPIRulesOfOneNamespaceShareOneFilter(t *testing.T) {
	g := NewWithT(t)
	out := Compute(world(
		policy("shop", "orders-api", 0, gatewayv1alpha1.TargetAPIRule, "orders"),
		policy("shop", "payments-api", 1, gatewayv1alpha1.TargetAPIRule, "payments"),
	))
	g.Expect(out.Verdicts).To(HaveLen(2))
	for _, v := range out.Verdicts {
		g.Expect(v.Enforced()).To(BeTrue(), v.Message)
		g.Expect(v.EnvoyFilters).To(Equal([]string{"istio-system/" + EnvoyFilterName("istio-system", "shop", ingress)}))
	}
	ef := out.EnvoyFilters[0]
	g.Expect(ef.Namespace).To(Equal("istio-system"), "the pods run in Istio's root namespace, not in shop")
	g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(ingress))
	g.Expect(ef.Labels).To(HaveKeyWithValue(LabelManagedBy, ManagedBy))
	g.Expect(ef.Labels).To(HaveKeyWithValue(LabelNamespace, "shop"))

	ps := patchesOf(g, out)
	g.Expect(ps).To(HaveLen(4), "one listener filter, one route patch per rule of each APIRule")
	g.Expect(ps[0]["applyTo"]).To(Equal("HTTP_FILTER"))
	filter := value(ps[0])
	name := HTTPFilterName("istio-system", "shop", ingress)
	g.Expect(filter["name"]).To(Equal(name))
	cfg := filter["typed_config"].(map[string]any)
	g.Expect(cfg["type_url"]).To(Equal("type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"))
	g.Expect(cfg["value"]).To(Equal(map[string]any{"stat_prefix": statPrefix}), "without a gateway-wide limit the listener filter is inert")

	var routes []string
	for _, p := range ps[1:] {
		g.Expect(p["applyTo"]).To(Equal("HTTP_ROUTE"))
		match := p["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)["route"].(map[string]any)
		routes = append(routes, match["name"].(string))
		perRoute := value(p)["typed_per_filter_config"].(map[string]any)
		g.Expect(perRoute).To(HaveKey(name), "per-route config names this filter")
		limit := perRoute[name].(map[string]any)["value"].(map[string]any)
		g.Expect(limit["token_bucket"]).To(Equal(map[string]any{"max_tokens": 100.0, "tokens_per_fill": 10.0, "fill_interval": "1s"}))
		g.Expect(limit["filter_enforced"].(map[string]any)["default_value"]).To(Equal(map[string]any{"numerator": 100.0, "denominator": "HUNDRED"}))
	}
	g.Expect(routes).To(ConsistOf(
		gatewayv1alpha1.RouteName("shop", "orders", orders.Rules[0]),
		gatewayv1alpha1.RouteName("shop", "orders", orders.Rules[1]),
		gatewayv1alpha1.RouteName("shop", "payments", payments.Rules[0])))
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
	g.Expect(loser.EnvoyFilters).To(BeEmpty())

	for _, p := range patchesOf(g, out)[1:] {
		perRoute := value(p)["typed_per_filter_config"].(map[string]any)
		bucket := perRoute[HTTPFilterName("istio-system", "shop", ingress)].(map[string]any)["value"].(map[string]any)["token_bucket"].(map[string]any)
		g.Expect(bucket["max_tokens"]).To(Equal(7.0), "the older policy's bucket is enforced")
	}

	// Same age: namespace/name decides, deterministically.
	a := policy("istio-system", "a", 1, gatewayv1alpha1.TargetGateway, "public")
	b := policy("istio-system", "b", 1, gatewayv1alpha1.TargetGateway, "public")
	out = Compute(world(b, a))
	g.Expect(out.Verdicts[id("istio-system", "a")].Enforced()).To(BeTrue())
	g.Expect(out.Verdicts[id("istio-system", "b")].Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
}

// In Envoy a route's typed_per_filter_config replaces the filter's own
// bucket for that route, and route descriptors replace the virtual host's,
// so a gateway-wide limit and route limits on the same pods cannot both
// hold. Within the namespace where the pods run the older one wins; route
// limits of other namespaces never displace that namespace's limits.
func TestGatewayWideAndRouteLimitsConflict(t *testing.T) {
	// internal selects the same pods as public with another label.
	internal := Gateway{Namespace: "istio-system", Name: "internal", Selector: map[string]string{"app": "istio-ingressgateway"}}
	edge := APIRule{Namespace: "istio-system", Name: "edge", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{{Path: "/edge", NoAuth: ptr.To(true)}}}
	tests := map[string]struct {
		policies []Policy
		winner   types.NamespacedName
		loser    types.NamespacedName
		message  string
	}{
		"gateway-wide first": {
			policies: []Policy{
				policy("istio-system", "edge", 2, gatewayv1alpha1.TargetAPIRule, "edge"),
				policy("istio-system", "whole", 1, gatewayv1alpha1.TargetGateway, "public"),
			},
			winner: id("istio-system", "whole"), loser: id("istio-system", "edge"),
			message: "the pods labelled app=istio-ingressgateway,istio=ingressgateway in namespace istio-system are already limited gateway-wide by the older RateLimit istio-system/whole",
		},
		"route first": {
			policies: []Policy{
				policy("istio-system", "edge", 1, gatewayv1alpha1.TargetAPIRule, "edge"),
				policy("istio-system", "whole", 2, gatewayv1alpha1.TargetGateway, "public"),
			},
			winner: id("istio-system", "edge"), loser: id("istio-system", "whole"),
			message: "routes of the pods labelled app=istio-ingressgateway,istio=ingressgateway in namespace istio-system are already limited by the older RateLimit istio-system/edge",
		},
		"same age: name decides": {
			policies: []Policy{
				policy("istio-system", "edge", 1, gatewayv1alpha1.TargetAPIRule, "edge"),
				policy("istio-system", "whole", 1, gatewayv1alpha1.TargetGateway, "public"),
			},
			winner: id("istio-system", "edge"), loser: id("istio-system", "whole"),
			message: "older RateLimit istio-system/edge",
		},
		"another namespace's older route limit does not displace the pods' namespace": {
			policies: []Policy{
				policy("shop", "orders-api", 1, gatewayv1alpha1.TargetAPIRule, "orders"),
				policy("istio-system", "whole", 2, gatewayv1alpha1.TargetGateway, "public"),
			},
			winner: id("istio-system", "whole"), loser: id("shop", "orders-api"),
			message: "are already limited gateway-wide by a RateLimit of the namespace where the pods run, which decides about them before route limits of other namespaces",
		},
		"another gateway selecting the same pods": {
			policies: []Policy{
				policy("istio-system", "edge", 2, gatewayv1alpha1.TargetAPIRule, "edge"),
				policy("istio-system", "whole", 1, gatewayv1alpha1.TargetGateway, "internal"),
			},
			winner: id("istio-system", "whole"), loser: id("istio-system", "edge"),
			message: "already limited gateway-wide by the older RateLimit istio-system/whole",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := world(tc.policies...)
			in.Gateways = append(in.Gateways, internal)
			in.APIRules = append(in.APIRules, edge)
			out := Compute(in)
			g.Expect(out.Verdicts[tc.winner].Enforced()).To(BeTrue(), out.Verdicts[tc.winner].Message)
			g.Expect(out.Verdicts[tc.loser].Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
			g.Expect(out.Verdicts[tc.loser].Message).To(ContainSubstring(tc.message))
			g.Expect(patchesOf(g, out)).NotTo(BeEmpty())
		})
	}
}

// A conflict message names the RateLimit that holds the scope only to its
// own namespace.
func TestConflictsDoNotNameOtherNamespacesRateLimits(t *testing.T) {
	g := NewWithT(t)
	out := Compute(world(
		policy("istio-system", "secret-name", 1, gatewayv1alpha1.TargetGateway, "public"),
		policy("shop", "orders-api", 0, gatewayv1alpha1.TargetAPIRule, "orders"),
	))
	v := out.Verdicts[id("shop", "orders-api")]
	g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
	g.Expect(v.Message).NotTo(ContainSubstring("secret-name"))
}

func TestDeletingPoliciesShrinksAndRemovesTheFilter(t *testing.T) {
	g := NewWithT(t)
	gw := policy("istio-system", "gw", 0, gatewayv1alpha1.TargetGateway, "public")
	api := policy("shop", "api", 1, gatewayv1alpha1.TargetAPIRule, "orders")
	pay := policy("shop", "pay", 2, gatewayv1alpha1.TargetAPIRule, "payments")
	g.Expect(patchesOf(g, Compute(world(api, pay)))).To(HaveLen(4))
	g.Expect(patchesOf(g, Compute(world(api)))).To(HaveLen(3))

	onlyGateway := patchesOf(g, Compute(world(gw)))
	g.Expect(onlyGateway).To(HaveLen(1))
	cfg := value(onlyGateway[0])["typed_config"].(map[string]any)["value"].(map[string]any)
	g.Expect(cfg["token_bucket"]).To(Equal(map[string]any{"max_tokens": 100.0, "tokens_per_fill": 10.0, "fill_interval": "1s"}))

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
			input: Input{APIRules: []APIRule{orders}, Pods: []Pod{ingressPod}, GatewaysKnown: true, APIRulesKnown: true,
				Policies: []Policy{policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "orders")}},
			message: "Istio gateway istio-system/public of APIRule shop/orders not found",
		},
		"Gateway CRD not installed": {
			input:   Input{Policies: []Policy{policy("istio-system", "p", 0, gatewayv1alpha1.TargetGateway, "public")}, APIRulesKnown: true},
			message: "gateways.networking.istio.io) is not installed",
		},
		"APIRule CRD not installed": {
			input:   Input{Gateways: []Gateway{public}, Pods: []Pod{ingressPod}, GatewaysKnown: true, Policies: []Policy{policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "orders")}},
			message: "apirules.gateway.portico.dev) is not installed",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := Compute(tc.input)
			g.Expect(out.EnvoyFilters).To(BeEmpty())
			g.Expect(out.Verdicts).To(HaveLen(1))
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

// Istio applies an EnvoyFilter's workloadSelector only to pods of the
// filter's namespace, or of every namespace from the root namespace. A
// tenant's filter lives in its own namespace when all the gateway's pods run
// there, else in the root namespace: never in another tenant's namespace.
func TestFilterIsWrittenInTheTenantsOrTheRootNamespace(t *testing.T) {
	bookinfo := Gateway{Namespace: "bookinfo", Name: "bookinfo", Selector: ingress}
	reviews := APIRule{Namespace: "bookinfo", Name: "reviews", Gateway: "bookinfo/bookinfo", Rules: []gatewayv1alpha1.Rule{{Path: "/reviews", NoAuth: ptr.To(true)}}}
	pod := func(ns string) Pod {
		return Pod{Namespace: ns, Labels: map[string]string{"istio": "ingressgateway", "pod-template-hash": ns}}
	}
	tests := map[string]struct {
		pods   []Pod
		root   string
		filter string // namespace; empty: NotEnforced
	}{
		"pods in the root namespace":                   {pods: []Pod{pod("istio-system")}, root: "istio-system", filter: "istio-system"},
		"replicas count once":                          {pods: []Pod{pod("istio-system"), pod("istio-system")}, root: "istio-system", filter: "istio-system"},
		"pods in two shared namespaces":                {pods: []Pod{pod("ingress-b"), pod("ingress-a")}, root: "istio-system", filter: "istio-system"},
		"pods in another tenant's namespace":           {pods: []Pod{pod("team-b")}, root: "istio-system", filter: "istio-system"},
		"pods in the RateLimit's namespace":            {pods: []Pod{pod("bookinfo")}, root: "istio-system", filter: "bookinfo"},
		"pods in the RateLimit's and another's":        {pods: []Pod{pod("bookinfo"), pod("team-b")}, root: "istio-system", filter: "istio-system"},
		"without a root namespace, pods beside it":     {pods: []Pod{pod("bookinfo")}, filter: "bookinfo"},
		"without a root namespace, pods elsewhere":     {pods: []Pod{pod("team-b"), pod("istio-system")}},
		"without a root namespace, pods partly beside": {pods: []Pod{pod("team-b"), pod("bookinfo")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := Compute(Input{
				Gateways: []Gateway{bookinfo}, APIRules: []APIRule{reviews}, Pods: tc.pods, RootNamespace: tc.root, GatewaysKnown: true, APIRulesKnown: true,
				Policies: []Policy{policy("bookinfo", "limit", 0, gatewayv1alpha1.TargetAPIRule, "reviews")},
			})
			v := out.Verdicts[id("bookinfo", "limit")]
			if tc.filter == "" {
				g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
				g.Expect(v.Message).To(ContainSubstring("do not all run in namespace bookinfo, and without Istio's root namespace"))
				g.Expect(out.EnvoyFilters).To(BeEmpty())
				return
			}
			g.Expect(out.EnvoyFilters).To(HaveLen(1))
			ef := out.EnvoyFilters[0]
			g.Expect(ef.Namespace).To(Equal(tc.filter))
			g.Expect(ef.Name).To(Equal(EnvoyFilterName(tc.filter, "bookinfo", ingress)))
			g.Expect(ef.Labels).To(HaveKeyWithValue(LabelNamespace, "bookinfo"))
			g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(ingress))
			g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed())
			g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), v.Message)
			g.Expect(v.EnvoyFilters).To(Equal([]string{tc.filter + "/" + ef.Name}))
		})
	}
}

// Every EnvoyFilter holds the limits of one namespace: two tenants on the
// same shared ingress pods get a filter each, with an HTTP filter name of
// its own, and one tenant's change leaves the other's filter as it was.
func TestEachNamespaceGetsItsOwnFilter(t *testing.T) {
	g := NewWithT(t)
	teamA := APIRule{Namespace: "team-a", Name: "api", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{{Path: "/a/*", NoAuth: ptr.To(true)}}}
	teamB := APIRule{Namespace: "team-b", Name: "api", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{{Path: "/b/*", NoAuth: ptr.To(true)}}}
	a := policy("team-a", "limit", 0, gatewayv1alpha1.TargetAPIRule, "api")
	b := policy("team-b", "limit", 1, gatewayv1alpha1.TargetAPIRule, "api")
	in := world(a, b)
	in.APIRules = []APIRule{teamA, teamB}
	out := Compute(in)

	g.Expect(out.EnvoyFilters).To(HaveLen(2))
	names := map[string]bool{}
	for i, tenant := range []string{"team-a", "team-b"} {
		ef := out.EnvoyFilters[i]
		if ef.Labels[LabelNamespace] != tenant {
			ef = out.EnvoyFilters[1-i]
		}
		g.Expect(ef.Namespace).To(Equal("istio-system"))
		g.Expect(ef.Name).To(Equal(EnvoyFilterName("istio-system", tenant, ingress)))
		g.Expect(ef.OwnerReferences).To(BeEmpty())
		g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed())
		ps := patches(g, ef)
		g.Expect(ps).To(HaveLen(2), "the listener filter and the tenant's one route")
		route := ps[1]["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)["route"].(map[string]any)["name"]
		g.Expect(route).To(HavePrefix(tenant+"."), "only the tenant's own routes")
		names[value(ps[0])["name"].(string)] = true
		g.Expect(out.Verdicts[id(tenant, "limit")].EnvoyFilters).To(Equal([]string{"istio-system/" + ef.Name}))
	}
	g.Expect(names).To(HaveLen(2), "each filter inserts an HTTP filter of its own name")

	// B changes, grows or goes: A's filter stays byte for byte.
	filterOf := func(out Output, tenant string) string {
		for _, ef := range out.EnvoyFilters {
			if ef.Labels[LabelNamespace] == tenant {
				return canonical(g, Output{EnvoyFilters: []*networkingv1alpha3client.EnvoyFilter{ef}})
			}
		}
		return ""
	}
	before := filterOf(out, "team-a")
	b.Spec.Local.MaxTokens = 1
	b.Spec.Descriptors = []gatewayv1alpha1.Descriptor{{Path: "/b/login"}}
	in.Policies = []Policy{a, b}
	g.Expect(filterOf(Compute(in), "team-a")).To(Equal(before))
	in.Policies = []Policy{a}
	g.Expect(filterOf(Compute(in), "team-a")).To(Equal(before))
}

func TestNotEnforcedWhenNoPodWouldApplyIt(t *testing.T) {
	other := Pod{Namespace: "istio-system", Labels: map[string]string{"istio": "egressgateway"}}
	tests := map[string]struct {
		input   Input
		message string
	}{
		"no pods at all": {
			input:   Input{Gateways: []Gateway{public}, GatewaysKnown: true, Policies: []Policy{policy("istio-system", "p", 0, gatewayv1alpha1.TargetGateway, "public")}},
			message: "no pod matches the selector istio=ingressgateway of Istio gateway istio-system/public",
		},
		"only pods with other labels": {
			input:   Input{Gateways: []Gateway{public}, Pods: []Pod{other}, GatewaysKnown: true, Policies: []Policy{policy("istio-system", "p", 0, gatewayv1alpha1.TargetGateway, "public")}},
			message: "no pod matches the selector istio=ingressgateway",
		},
		"route limits without pods": {
			input: Input{Gateways: []Gateway{public}, APIRules: []APIRule{orders}, GatewaysKnown: true, APIRulesKnown: true,
				Policies: []Policy{policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "orders")}},
			message: "no pod matches the selector istio=ingressgateway of Istio gateway istio-system/public",
		},
		"gateway without a selector": {
			input: Input{Gateways: []Gateway{{Namespace: "istio-system", Name: "any"}}, Pods: []Pod{ingressPod}, GatewaysKnown: true,
				Policies: []Policy{policy("istio-system", "p", 0, gatewayv1alpha1.TargetGateway, "any")}},
			message: "Istio gateway istio-system/any has no selector",
		},
		"APIRule without rules": {
			input: Input{Gateways: []Gateway{public}, APIRules: []APIRule{{Namespace: "shop", Name: "empty", Gateway: "istio-system/public"}},
				Pods: []Pod{ingressPod}, GatewaysKnown: true, APIRulesKnown: true,
				Policies: []Policy{policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "empty")}},
			message: "APIRule shop/empty on Istio gateway istio-system/public has no rules to limit",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := Compute(tc.input)
			g.Expect(out.EnvoyFilters).To(BeEmpty())
			g.Expect(out.Verdicts).To(HaveLen(1))
			for _, v := range out.Verdicts {
				g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
				g.Expect(v.Message).To(ContainSubstring(tc.message))
				g.Expect(v.EnvoyFilters).To(BeEmpty())
			}
		})
	}
}

// A gateway-wide limit throttles every request through the pods, so it
// applies only when all of them run in the RateLimit's own namespace.
func TestGatewayWideLimitsOnlyOnTheTenantsOwnPods(t *testing.T) {
	bookinfo := Gateway{Namespace: "bookinfo", Name: "bookinfo", Selector: ingress}
	pod := func(ns string) Pod { return Pod{Namespace: ns, Labels: ingress} }
	tests := map[string]struct {
		pods   []Pod
		filter string // namespace; empty: NotEnforced
	}{
		"pods in the RateLimit's namespace":  {pods: []Pod{pod("bookinfo")}, filter: "bookinfo"},
		"pods in the root namespace":         {pods: []Pod{pod("istio-system")}},
		"pods in another tenant's namespace": {pods: []Pod{pod("team-b")}},
		// Another tenant's pods with the same labels are not limited, and
		// cannot switch the limit off.
		"pods in the RateLimit's and another's too": {pods: []Pod{pod("bookinfo"), pod("team-b")}, filter: "bookinfo"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out := Compute(Input{
				Gateways: []Gateway{bookinfo}, Pods: tc.pods, RootNamespace: DefaultRootNamespace, GatewaysKnown: true,
				Policies: []Policy{policy("bookinfo", "p", 0, gatewayv1alpha1.TargetGateway, "bookinfo")},
			})
			v := out.Verdicts[id("bookinfo", "p")]
			if tc.filter == "" {
				g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
				g.Expect(v.Message).To(ContainSubstring("no pod that Istio gateway bookinfo/bookinfo selects (istio=ingressgateway) runs in namespace bookinfo"))
				g.Expect(out.EnvoyFilters).To(BeEmpty())
				return
			}
			g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), v.Message)
			g.Expect(out.EnvoyFilters).To(HaveLen(1))
			g.Expect(out.EnvoyFilters[0].Namespace).To(Equal(tc.filter))
		})
	}
}

// Another tenant's Gateway that selects A's pods, with APIRules and older
// RateLimits on it, changes nothing for A's gateway-wide limit.
func TestAnotherTenantsGatewayChangesNothing(t *testing.T) {
	g := NewWithT(t)
	podA := Pod{Namespace: "team-a", Labels: map[string]string{"app": "a-gateway"}}
	gwA := Gateway{Namespace: "team-a", Name: "gw", Selector: podA.Labels}
	limitA := policy("team-a", "whole", 5, gatewayv1alpha1.TargetGateway, "gw")
	alone := Input{Gateways: []Gateway{gwA}, Pods: []Pod{podA}, Policies: []Policy{limitA}, RootNamespace: DefaultRootNamespace, GatewaysKnown: true, APIRulesKnown: true}
	want := canonical(g, Compute(alone))
	g.Expect(Compute(alone).Verdicts[id("team-a", "whole")].Enforced()).To(BeTrue())

	attacked := alone
	attacked.Gateways = []Gateway{gwA,
		{Namespace: "team-b", Name: "steal", Selector: podA.Labels},
		{Namespace: "team-b", Name: "catch-all"}, // no selector: every gateway pod
	}
	attacked.APIRules = []APIRule{
		{Namespace: "team-b", Name: "via-own", Gateway: "team-b/steal", Rules: []gatewayv1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}}},
		{Namespace: "team-b", Name: "via-a", Gateway: "team-a/gw", Rules: []gatewayv1alpha1.Rule{{Path: "/b", NoAuth: ptr.To(true)}}},
	}
	attacked.Policies = []Policy{limitA,
		policy("team-b", "older-route", 0, gatewayv1alpha1.TargetAPIRule, "via-own"),
		policy("team-b", "older-route-2", 1, gatewayv1alpha1.TargetAPIRule, "via-a"),
		policy("team-b", "gateway-wide", 0, gatewayv1alpha1.TargetGateway, "steal"),
	}
	out := Compute(attacked)
	delete(out.Verdicts, id("team-b", "older-route"))
	delete(out.Verdicts, id("team-b", "older-route-2"))
	delete(out.Verdicts, id("team-b", "gateway-wide"))
	g.Expect(canonical(g, out)).To(Equal(want), "A's verdict and filter are the same, and B writes no filter")

	// B's pods carrying A's gateway labels: Istio configures them as A's
	// gateway too, but A's limit stays on A's pods, unchanged.
	withPods := alone
	withPods.Pods = []Pod{podA, {Namespace: "team-b", Labels: podA.Labels}}
	g.Expect(canonical(g, Compute(withPods))).To(Equal(want), "B's look-alike pods change nothing for A")

	v := Compute(attacked).Verdicts
	g.Expect(v[id("team-b", "gateway-wide")].Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced), "B may not throttle A's pods")
	for _, name := range []string{"older-route", "older-route-2"} {
		g.Expect(v[id("team-b", name)].Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
		g.Expect(v[id("team-b", name)].Message).To(ContainSubstring("the gateway pods of another namespace are already limited gateway-wide by a RateLimit of the namespace where the pods run"))
		g.Expect(v[id("team-b", name)].Message).NotTo(ContainSubstring("team-a"))
	}
}

// Owner references let the garbage collector remove an EnvoyFilter whose
// RateLimits are all gone; only RateLimits of the filter's namespace can own
// it, so a filter in the root namespace for another namespace has none.
func TestOwnerReferencesNameContributorsOfTheFiltersNamespace(t *testing.T) {
	edge := APIRule{Namespace: "istio-system", Name: "edge", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{{Path: "/edge", NoAuth: ptr.To(true)}}}
	tests := map[string]struct {
		policies []Policy
		owners   []string
	}{
		"gateway-wide limit beside the pods": {
			policies: []Policy{policy("istio-system", "whole", 0, gatewayv1alpha1.TargetGateway, "public")},
			owners:   []string{"whole"},
		},
		"route limits from another namespace only": {
			policies: []Policy{policy("shop", "orders-api", 0, gatewayv1alpha1.TargetAPIRule, "orders")},
		},
		"root namespace's filter: its contributors, losers excluded": {
			policies: []Policy{
				policy("shop", "orders-api", 0, gatewayv1alpha1.TargetAPIRule, "orders"), // a filter of its own
				policy("istio-system", "edge-b", 1, gatewayv1alpha1.TargetAPIRule, "edge"),
				policy("istio-system", "edge-a", 2, gatewayv1alpha1.TargetAPIRule, "edge"), // conflicted
			},
			owners: []string{"edge-b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := world(tc.policies...)
			in.APIRules = append(in.APIRules, edge)
			out := Compute(in)
			var ef *networkingv1alpha3client.EnvoyFilter
			for _, f := range out.EnvoyFilters {
				if f.Labels[LabelNamespace] == tc.policies[len(tc.policies)-1].Namespace {
					ef = f
				}
			}
			g.Expect(ef).NotTo(BeNil())
			var owners []string
			for _, ref := range ef.OwnerReferences {
				g.Expect(ref.APIVersion).To(Equal("gateway.portico.dev/v1alpha1"))
				g.Expect(ref.Kind).To(Equal("RateLimit"))
				g.Expect(ref.UID).To(Equal(types.UID("uid-istio-system-" + ref.Name)))
				g.Expect(ref.Controller).To(Equal(ptr.To(false)))
				g.Expect(ref.BlockOwnerDeletion).To(Equal(ptr.To(false)))
				owners = append(owners, ref.Name)
			}
			g.Expect(owners).To(Equal(tc.owners))
		})
	}
}

// Two EnvoyFilters whose selectors overlap on the same pods insert two
// filters; each must read only its own routes' buckets.
func TestOverlappingSelectorsGetTheirOwnHTTPFilter(t *testing.T) {
	g := NewWithT(t)
	internal := Gateway{Namespace: "istio-system", Name: "internal", Selector: map[string]string{"app": "istio-ingressgateway"}}
	admin := APIRule{Namespace: "shop", Name: "admin", Gateway: "istio-system/internal", Rules: []gatewayv1alpha1.Rule{{Path: "/admin", NoAuth: ptr.To(true)}}}
	in := world(
		policy("shop", "orders-api", 0, gatewayv1alpha1.TargetAPIRule, "orders"),
		policy("shop", "admin-api", 1, gatewayv1alpha1.TargetAPIRule, "admin"),
	)
	in.Gateways = append(in.Gateways, internal)
	in.APIRules = append(in.APIRules, admin)
	out := Compute(in)
	g.Expect(out.Verdicts[id("shop", "orders-api")].Enforced()).To(BeTrue())
	g.Expect(out.Verdicts[id("shop", "admin-api")].Enforced()).To(BeTrue(), "different routes on the same pods do not conflict")
	g.Expect(out.EnvoyFilters).To(HaveLen(2))
	names := map[string]bool{}
	for _, ef := range out.EnvoyFilters {
		g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed(), "per-route configs name the filter of their own EnvoyFilter")
		names[value(patches(g, ef)[0])["name"].(string)] = true
	}
	g.Expect(names).To(HaveLen(2))
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
	ps := patchesOf(g, Compute(world(p)))
	g.Expect(ps).To(HaveLen(2))
	g.Expect(ps[1]["applyTo"]).To(Equal("VIRTUAL_HOST"))

	cfg := value(ps[0])["typed_config"].(map[string]any)["value"].(map[string]any)
	g.Expect(cfg["filter_enforced"].(map[string]any)["default_value"].(map[string]any)["numerator"]).To(Equal(0.0), "enforce: false is shadow mode")
	g.Expect(cfg["enable_x_ratelimit_headers"]).To(Equal("DRAFT_VERSION_03"))
	descriptors := cfg["descriptors"].([]any)
	g.Expect(descriptors).To(HaveLen(2))
	g.Expect(descriptors[0].(map[string]any)["token_bucket"]).To(Equal(map[string]any{"max_tokens": 5.0, "tokens_per_fill": 5.0, "fill_interval": "60s"}))
	g.Expect(descriptors[1].(map[string]any)["token_bucket"].(map[string]any)["max_tokens"]).To(Equal(100.0), "a descriptor without a bucket uses spec.local")

	limits := value(ps[1])["rate_limits"].([]any)
	first := limits[0].(map[string]any)["actions"].([]any)[0].(map[string]any)["header_value_match"].(map[string]any)
	g.Expect(first["descriptor_value"]).To(Equal("d0"))
	g.Expect(first["headers"]).To(Equal([]any{map[string]any{"name": ":path", "string_match": map[string]any{"prefix": "/login"}}}))
}

func TestComputeIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	in := world(
		policy("shop", "pay", 1, gatewayv1alpha1.TargetAPIRule, "payments"),
		policy("shop", "api", 1, gatewayv1alpha1.TargetAPIRule, "orders"),
	)
	in.Pods = append(in.Pods, Pod{Namespace: "edge", Labels: ingress})
	first := canonical(g, Compute(in))
	in.Policies[0], in.Policies[1] = in.Policies[1], in.Policies[0]
	in.APIRules[0], in.APIRules[1] = in.APIRules[1], in.APIRules[0]
	in.Pods[0], in.Pods[1] = in.Pods[1], in.Pods[0]
	g.Expect(canonical(g, Compute(in))).To(Equal(first))
}

// canonical is an Output as JSON, verdicts sorted by policy.
func canonical(g Gomega, out Output) string {
	verdicts := map[string]Verdict{}
	for k, v := range out.Verdicts {
		verdicts[k.String()] = v // encoding/json sorts map keys
	}
	raw, err := json.Marshal(struct {
		EnvoyFilters []*networkingv1alpha3client.EnvoyFilter
		Verdicts     map[string]Verdict
	}{out.EnvoyFilters, verdicts})
	g.Expect(err).NotTo(HaveOccurred())
	return string(raw)
}
