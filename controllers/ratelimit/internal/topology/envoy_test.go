package topology

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// specOptions are the variations of a RateLimit spec the patches render.
var specOptions = map[string]func(*Policy){
	"plain":       func(*Policy) {},
	"shadow mode": func(p *Policy) { p.Spec.Enforce = ptr.To(false) },
	"response headers": func(p *Policy) {
		p.Spec.ResponseHeaders = ptr.To(true)
	},
	"largest bucket, longest interval": func(p *Policy) {
		p.Spec.Local = &gatewayv1alpha1.TokenBucket{MaxTokens: 1_000_000_000, TokensPerFill: 1_000_000_000, FillInterval: metav1.Duration{Duration: 24 * time.Hour}}
	},
	"fractional interval": func(p *Policy) {
		p.Spec.Local.FillInterval = metav1.Duration{Duration: 1500*time.Millisecond + time.Nanosecond}
	},
	"global only, every client key": func(p *Policy) {
		p.Spec.Local = nil
		p.Spec.Global = everyGlobalRule()
	},
	"local and global, shadow, headers": func(p *Policy) {
		p.Spec.Enforce = ptr.To(false)
		p.Spec.ResponseHeaders = ptr.To(true)
		p.Spec.Global = everyGlobalRule()
	},
	"descriptors of every kind": func(p *Policy) {
		p.Spec.Enforce = ptr.To(false)
		p.Spec.ResponseHeaders = ptr.To(true)
		p.Spec.Descriptors = []gatewayv1alpha1.Descriptor{
			{Path: "/login"},
			{Header: &gatewayv1alpha1.HeaderMatch{Name: "x-tenant", Value: "free"}},
			{Path: "/", Header: &gatewayv1alpha1.HeaderMatch{Name: "X-Plan!#$%&'*+-.^_|~", Value: ""},
				Bucket: &gatewayv1alpha1.TokenBucket{MaxTokens: 3, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: 90 * time.Second}}},
		}
	},
}

// TestEveryPatchIsValidEnvoyConfig parses every patch the topology renders —
// gateway-wide and per-route limits with every option — into Envoy's typed
// protos and validates them.
func TestEveryPatchIsValidEnvoyConfig(t *testing.T) {
	seen := patchCounts{}
	for name, option := range specOptions {
		for _, kind := range []gatewayv1alpha1.TargetKind{gatewayv1alpha1.TargetGateway, gatewayv1alpha1.TargetAPIRule} {
			t.Run(name+"/"+string(kind), func(t *testing.T) {
				g := NewWithT(t)
				target := map[gatewayv1alpha1.TargetKind]string{gatewayv1alpha1.TargetGateway: "public", gatewayv1alpha1.TargetAPIRule: "orders"}[kind]
				ns := map[gatewayv1alpha1.TargetKind]string{gatewayv1alpha1.TargetGateway: "istio-system", gatewayv1alpha1.TargetAPIRule: "shop"}[kind]
				in := world(policy(ns, "p", 0, kind, target, option))
				in.Global = testGlobal
				out := Compute(in)
				g.Expect(out.Verdicts[id(ns, "p")].Enforced()).To(BeTrue(), out.Verdicts[id(ns, "p")].Message)
				g.Expect(out.EnvoyFilters).To(HaveLen(1))
				g.Expect(validateEnvoyFilter(out.EnvoyFilters[0], seen)).To(Succeed())
			})
		}
	}
	g := NewWithT(t)
	g.Expect(seen).To(HaveKeyWithValue(networkingv1alpha3.EnvoyFilter_HTTP_FILTER, BeNumerically(">=", 2*len(specOptions))))
	g.Expect(seen).To(HaveKeyWithValue(networkingv1alpha3.EnvoyFilter_VIRTUAL_HOST, BeNumerically(">=", 1)))
	g.Expect(seen).To(HaveKeyWithValue(networkingv1alpha3.EnvoyFilter_HTTP_ROUTE, BeNumerically(">=", 2*len(specOptions))))
}

// The validator must catch what Envoy or Istio would reject.
func TestValidationRejectsBrokenPatches(t *testing.T) {
	routeLimit := policy("shop", "p", 0, gatewayv1alpha1.TargetAPIRule, "orders", specOptions["descriptors of every kind"])
	gatewayLimit := policy("istio-system", "p", 0, gatewayv1alpha1.TargetGateway, "public", specOptions["descriptors of every kind"])
	// edit changes a patch value's JSON-like map in place.
	edit := func(p Policy, patch int, change func(v map[string]any)) *networkingv1alpha3client.EnvoyFilter {
		ef := Compute(world(p)).EnvoyFilters[0]
		v := ef.Spec.ConfigPatches[patch].Patch.Value.AsMap()
		change(v)
		ef.Spec.ConfigPatches[patch].Patch.Value = mustStruct(v)
		return ef
	}
	lrl := func(v map[string]any) map[string]any {
		return v["typed_config"].(map[string]any)["value"].(map[string]any)
	}
	tests := map[string]struct {
		filter  *networkingv1alpha3client.EnvoyFilter
		message string
	}{
		"unknown field in LocalRateLimit": {
			filter:  edit(gatewayLimit, 0, func(v map[string]any) { lrl(v)["max_tokenz"] = 1.0 }),
			message: "max_tokenz",
		},
		"no tokens per fill": {
			filter:  edit(gatewayLimit, 0, func(v map[string]any) { lrl(v)["token_bucket"].(map[string]any)["tokens_per_fill"] = 0.0 }),
			message: "TokensPerFill",
		},
		"zero fill interval": {
			filter: edit(routeLimit, 1, func(v map[string]any) {
				perRoute := v["typed_per_filter_config"].(map[string]any)[HTTPFilterName("istio-system", "shop", ingress)].(map[string]any)
				perRoute["value"].(map[string]any)["token_bucket"].(map[string]any)["fill_interval"] = "0s"
			}),
			message: "FillInterval",
		},
		"duration JSON Envoy cannot read": {
			filter:  edit(gatewayLimit, 0, func(v map[string]any) { lrl(v)["token_bucket"].(map[string]any)["fill_interval"] = "1e+06s" }),
			message: "invalid google.protobuf.Duration",
		},
		"descriptor action without headers": {
			filter: edit(gatewayLimit, 1, func(v map[string]any) {
				v["rate_limits"].([]any)[0].(map[string]any)["actions"].([]any)[0].(map[string]any)["header_value_match"].(map[string]any)["headers"] = []any{}
			}),
			message: "Headers",
		},
		"per-route config for a filter not inserted": {
			filter: edit(routeLimit, 1, func(v map[string]any) {
				perRoute := v["typed_per_filter_config"].(map[string]any)
				for name, cfg := range perRoute {
					delete(perRoute, name)
					perRoute["envoy.filters.http.local_ratelimit"] = cfg
				}
			}),
			message: "does not insert",
		},
		"not a TypedStruct": {
			filter: edit(gatewayLimit, 0, func(v map[string]any) {
				v["typed_config"].(map[string]any)["@type"] = "type.googleapis.com/google.protobuf.Struct"
			}),
			message: `unknown field "type_url"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := validateEnvoyFilter(tc.filter, nil)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	// And the unbroken ones pass.
	g := NewWithT(t)
	g.Expect(validateEnvoyFilter(Compute(world(routeLimit)).EnvoyFilters[0], nil)).To(Succeed())
	g.Expect(validateEnvoyFilter(Compute(world(gatewayLimit)).EnvoyFilters[0], nil)).To(Succeed())
}

func TestProtoDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second:                      "1s",
		1122 * time.Millisecond:          "1.122s",
		24 * time.Hour:                   "86400s",
		90*time.Second + time.Nanosecond: "90.000000001s",
		-1500 * time.Millisecond:         "-1.5s",
	} {
		if got := protoDuration(d); got != want {
			t.Errorf("protoDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
