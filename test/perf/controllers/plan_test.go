package main

import (
	"testing"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// TestPlan pins what the controllers must make of the short and the full
// bench: groups (one Enforced limit each), missing targets and EnvoyFilters
// with their patches.
func TestPlan(t *testing.T) {
	tests := []struct {
		name                      string
		sizes                     sizes
		groups, missing, wantJWT  int
		envoyFilters, gatewayWide int
		patches                   map[envoyFilterKey]int
	}{
		{
			name: "short", sizes: shortOptions().sizes, groups: 9, missing: 2, wantJWT: 10, envoyFilters: 2, gatewayWide: 2,
			patches: map[envoyFilterKey]int{{gatewayNS, "bench-gw-00"}: 2, {"bench-ctrl-01", "bench-gw-01"}: 1 + 2*8},
		},
		{
			name: "full", sizes: defaultOptions().sizes, groups: 25 + 25*18, missing: 50, wantJWT: 500, envoyFilters: 50, gatewayWide: 50,
			patches: map[envoyFilterKey]int{{gatewayNS, "bench-gw-48"}: 2, {"bench-ctrl-09", "bench-gw-49"}: 1 + 2*18},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlan(tt.sizes)
			if len(p.apiRules) != tt.sizes.apiRules || len(p.services) != tt.sizes.apiRules || len(p.rateLimits) != tt.sizes.rateLimits ||
				len(p.gateways) != tt.sizes.gateways || len(p.pods) != tt.sizes.gateways || len(p.limits) != tt.sizes.rateLimits {
				t.Fatalf("plan sizes: %d APIRules, %d Services, %d RateLimits (%d distinct), %d Gateways, %d pods",
					len(p.apiRules), len(p.services), len(p.rateLimits), len(p.limits), len(p.gateways), len(p.pods))
			}
			jwt, missing, gatewayWide := 0, 0, 0
			for _, withJWT := range p.jwt {
				if withJWT {
					jwt++
				}
			}
			for _, rl := range p.rateLimits {
				if p.limits[key(rl.Namespace, rl.Name)] == "" {
					missing++
				}
				if rl.Spec.TargetRef.Kind == gatewayv1alpha1.TargetGateway {
					gatewayWide++
				}
			}
			if p.groups != tt.groups || missing != tt.missing || jwt != tt.wantJWT || gatewayWide != tt.gatewayWide {
				t.Errorf("%d groups, %d missing targets, %d JWT APIRules, %d gateway-wide limits; want %d, %d, %d, %d",
					p.groups, missing, jwt, gatewayWide, tt.groups, tt.missing, tt.wantJWT, tt.gatewayWide)
			}
			if len(p.envoyFilters) != tt.envoyFilters {
				t.Errorf("%d EnvoyFilters, want %d: %v", len(p.envoyFilters), tt.envoyFilters, p.envoyFilters)
			}
			for k, want := range tt.patches {
				if got := p.envoyFilters[k]; got != want {
					t.Errorf("EnvoyFilter %v: %d patches, want %d", k, got, want)
				}
			}
		})
	}
}
