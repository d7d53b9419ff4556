package topology

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
)

var testGlobal = &Global{ServiceNamespace: "portico-system", FailOpen: true, Timeout: 100 * time.Millisecond, Key: []byte("0123456789abcdef0123456789abcdef")}

// everyGlobalRule has a rule of every shape: shared, matched, and keyed
// by each kind of client key.
func everyGlobalRule() *gatewayv1alpha1.GlobalRateLimit {
	return &gatewayv1alpha1.GlobalRateLimit{Rules: []gatewayv1alpha1.GlobalRule{
		{Name: "all", Requests: 1000, Unit: gatewayv1alpha1.UnitMinute},
		{Name: "login", Requests: 5, Unit: gatewayv1alpha1.UnitSecond, Algorithm: gatewayv1alpha1.AlgorithmTokenBucket, Burst: ptr.To[int64](10),
			Match: &gatewayv1alpha1.GlobalMatch{Path: "/login", Header: &gatewayv1alpha1.HeaderMatch{Name: "X-Plan", Value: "free"}}},
		{Name: "per-key", Requests: 100, Unit: gatewayv1alpha1.UnitHour, ClientKeys: []gatewayv1alpha1.ClientKey{
			{Type: gatewayv1alpha1.ClientKeyHeader, Header: "X-API-Key"},
			{Type: gatewayv1alpha1.ClientKeyClientAddress},
			{Type: gatewayv1alpha1.ClientKeyJWTClaim, Claim: &gatewayv1alpha1.JWTClaimKey{Issuer: "https://issuer.example.com", Name: "sub"}},
		}},
	}}
}

func globalPolicy(ns, name string, age int, kind gatewayv1alpha1.TargetKind, target string) Policy {
	return policy(ns, name, age, kind, target, func(p *Policy) {
		p.Spec.Local = nil
		p.Spec.Global = everyGlobalRule()
	})
}

// filterJSON is an EnvoyFilter's spec as JSON text.
func filterJSON(g Gomega, out Output, i int) string {
	raw, err := json.Marshal(&out.EnvoyFilters[i].Spec)
	g.Expect(err).NotTo(HaveOccurred())
	return string(raw)
}

func TestGlobalRulesWaitForTheAdministrator(t *testing.T) {
	g := NewWithT(t)
	for name, global := range map[string]*Global{"not enabled": nil, "no key yet": {ServiceNamespace: "portico-system"}} {
		in := world(globalPolicy("istio-system", "g", 0, gatewayv1alpha1.TargetGateway, "public"))
		in.Global = global
		out := Compute(in)
		v := out.Verdicts[id("istio-system", "g")]
		g.Expect(v.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced), name)
		g.Expect(v.Message).To(ContainSubstring("spec.rateLimits.global"), name)
		g.Expect(out.EnvoyFilters).To(BeEmpty(), name)
		g.Expect(out.GlobalConfigs).To(BeEmpty(), name)
	}
}

func TestGatewayWideGlobalRules(t *testing.T) {
	g := NewWithT(t)
	in := world(globalPolicy("istio-system", "g", 0, gatewayv1alpha1.TargetGateway, "public"))
	in.Global = testGlobal
	out := Compute(in)
	g.Expect(out.Verdicts[id("istio-system", "g")].Enforced()).To(BeTrue(), out.Verdicts[id("istio-system", "g")].Message)
	ps := patchesOf(g, out)
	g.Expect(ps).To(HaveLen(1), "no local filter without spec.local")
	cfg := ps[0]["patch"].(map[string]any)["value"].(map[string]any)["typed_config"].(map[string]any)["value"].(map[string]any)
	g.Expect(cfg["domain"]).To(Equal("portico/istio-system"))
	g.Expect(cfg["failure_mode_deny"]).To(BeFalse(), "fail open")
	g.Expect(cfg["stage"]).To(Equal(1.0))
	g.Expect(cfg["rate_limit_service"]).To(HaveKeyWithValue("grpc_service", HaveKeyWithValue("envoy_grpc",
		HaveKeyWithValue("cluster_name", "outbound|8081||portico-ratelimit-service.portico-system.svc.cluster.local"))))
	limits := cfg["rate_limits"].([]any)
	g.Expect(limits).To(HaveLen(3))
	token := globallimit.Token(testGlobal.Key, "istio-system")
	for i, rule := range []string{"all", "login", "per-key"} {
		actions := limits[i].(map[string]any)["actions"].([]any)
		g.Expect(actions[0]).To(Equal(map[string]any{"generic_key": map[string]any{"descriptor_key": "portico_token", "descriptor_value": token}}))
		g.Expect(actions[1]).To(Equal(map[string]any{"generic_key": map[string]any{"descriptor_key": "portico_limit", "descriptor_value": "g/" + rule}}))
	}
	keys := limits[2].(map[string]any)["actions"].([]any)[2:]
	g.Expect(keys).To(Equal([]any{
		map[string]any{"request_headers": map[string]any{"header_name": "x-api-key", "descriptor_key": "header:x-api-key", "skip_if_absent": true}},
		map[string]any{"remote_address": map[string]any{}},
		map[string]any{"metadata": map[string]any{
			"descriptor_key": "claim:https://issuer.example.com:sub",
			"metadata_key": map[string]any{"key": "envoy.filters.http.jwt_authn", "path": []any{
				map[string]any{"key": "https://issuer.example.com"}, map[string]any{"key": "sub"}}},
			"source": "DYNAMIC", "skip_if_absent": true,
		}},
	}), "a claim is read from what the JWT filter recorded after validation, never from a header")
	g.Expect(out.GlobalConfigs).To(Equal([]globallimit.Config{{Namespace: "istio-system", Limits: []globallimit.Limit{
		{ID: "g/all", Requests: 1000, Unit: globallimit.Minute, Algorithm: globallimit.FixedWindow},
		{ID: "g/login", Requests: 5, Unit: globallimit.Second, Algorithm: globallimit.TokenBucket, Burst: 10},
		{ID: "g/per-key", Requests: 100, Unit: globallimit.Hour, Algorithm: globallimit.FixedWindow},
	}}}))
	g.Expect(out.GlobalConfigs[0].Validate()).To(Succeed())
}

func TestFailClosedWhenTheAdministratorSaysSo(t *testing.T) {
	g := NewWithT(t)
	in := world(globalPolicy("istio-system", "g", 0, gatewayv1alpha1.TargetGateway, "public"))
	closed := *testGlobal
	closed.FailOpen = false
	in.Global = &closed
	g.Expect(filterJSON(g, Compute(in), 0)).To(ContainSubstring(`"failure_mode_deny":true`))
}

func TestRouteGlobalRulesAreRouteConfigOfTheTenantsFilter(t *testing.T) {
	g := NewWithT(t)
	in := world(globalPolicy("shop", "r", 0, gatewayv1alpha1.TargetAPIRule, "orders"))
	in.Global = testGlobal
	out := Compute(in)
	g.Expect(out.Verdicts[id("shop", "r")].Enforced()).To(BeTrue(), out.Verdicts[id("shop", "r")].Message)
	ps := patchesOf(g, out)
	filterName := HTTPGlobalFilterName("istio-system", "shop", ingress)
	cfg := ps[0]["patch"].(map[string]any)["value"].(map[string]any)
	g.Expect(cfg["name"]).To(Equal(filterName))
	g.Expect(cfg["typed_config"].(map[string]any)["value"]).NotTo(HaveKey("rate_limits"), "route limits only: the filter itself sends nothing")
	routes := 0
	for _, p := range ps[1:] {
		g.Expect(p["applyTo"]).To(Equal("HTTP_ROUTE"))
		perFilter := p["patch"].(map[string]any)["value"].(map[string]any)["typed_per_filter_config"].(map[string]any)
		g.Expect(perFilter).To(HaveLen(1), "no local config without spec.local")
		g.Expect(perFilter[filterName].(map[string]any)["type_url"]).To(Equal(rateLimitPerRouteV3))
		routes++
	}
	g.Expect(routes).To(Equal(len(orders.Rules)))
}

// Two tenants limiting routes on the same gateway pods get two filters
// with their own domains and tokens: neither filter carries the other's.
func TestTenantsNeverShareADomainOrToken(t *testing.T) {
	g := NewWithT(t)
	other := orders
	other.Namespace, other.Name = "other", "orders"
	in := world(globalPolicy("shop", "r", 0, gatewayv1alpha1.TargetAPIRule, "orders"), globalPolicy("other", "r", 1, gatewayv1alpha1.TargetAPIRule, "orders"))
	in.APIRules = append(in.APIRules, other)
	in.Global = testGlobal
	out := Compute(in)
	g.Expect(out.EnvoyFilters).To(HaveLen(2))
	shop, otherToken := globallimit.Token(testGlobal.Key, "shop"), globallimit.Token(testGlobal.Key, "other")
	g.Expect(shop).NotTo(Equal(otherToken))
	for i, ef := range out.EnvoyFilters {
		text := filterJSON(g, out, i)
		mine, theirs := shop, otherToken
		if ef.Labels[LabelNamespace] == "other" {
			mine, theirs = otherToken, shop
		}
		g.Expect(text).To(ContainSubstring(mine))
		g.Expect(text).NotTo(ContainSubstring(theirs))
		g.Expect(strings.Count(text, `"domain":"portico/`+ef.Labels[LabelNamespace]+`"`)).To(Equal(1))
		g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed())
	}
	g.Expect(out.GlobalConfigs).To(HaveLen(2))
}

// A RateLimit that loses a conflict puts nothing into the service's
// configuration.
func TestConflictedGlobalRulesAreNotConfigured(t *testing.T) {
	g := NewWithT(t)
	in := world(globalPolicy("istio-system", "old", 0, gatewayv1alpha1.TargetGateway, "public"), globalPolicy("istio-system", "new", 1, gatewayv1alpha1.TargetGateway, "public"))
	in.Global = testGlobal
	out := Compute(in)
	g.Expect(out.Verdicts[id("istio-system", "new")].Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
	g.Expect(out.GlobalConfigs).To(HaveLen(1))
	for _, l := range out.GlobalConfigs[0].Limits {
		g.Expect(l.ID).To(HavePrefix("old/"))
	}
}
