package main

import (
	"reflect"
	"testing"

	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

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
			patches: map[envoyFilterKey]int{{gatewayNS, "bench-gw-48"}: 2, {"bench-ctrl-49", "bench-gw-49"}: 1 + 2*18},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlan(tt.sizes)
			if len(p.apiRules) != tt.sizes.apiRules || len(p.routeRules) != tt.sizes.apiRules || len(p.services) != 2*tt.sizes.apiRules ||
				len(p.rateLimits) != tt.sizes.rateLimits || len(p.gateways) != tt.sizes.gateways || len(p.routeGateways) != tt.sizes.gateways ||
				len(p.pods) != tt.sizes.gateways || len(p.limits) != tt.sizes.rateLimits {
				t.Fatalf("plan sizes: %d+%d APIRules, %d Services, %d RateLimits (%d distinct), %d+%d Gateways, %d pods",
					len(p.apiRules), len(p.routeRules), len(p.services), len(p.rateLimits), len(p.limits), len(p.gateways), len(p.routeGateways), len(p.pods))
			}
			checkModes(t, p)
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

// checkModes: the HTTPRoute-mode APIRules are Istio mode's under their own
// names, hosts and Services, each naming a Gateway API Gateway of the plan.
func checkModes(t *testing.T, p *plan) {
	t.Helper()
	gateways := map[string]bool{}
	for _, gw := range p.routeGateways {
		gateways[key(gw.Namespace, gw.Name)] = gw.Spec.GatewayClassName == gatewayapiv1.ObjectName(p.gatewayClass.Name)
	}
	names, hosts, services := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, svc := range p.services {
		services[key(svc.Namespace, svc.Name)] = true
	}
	for i, rule := range p.routeRules {
		istio := p.apiRules[i]
		switch {
		case rule.Spec.ParentRef == nil || rule.Spec.Gateway != "":
			t.Fatalf("%s is not in HTTPRoute mode: gateway %q, parentRef %v", rule.Name, rule.Spec.Gateway, rule.Spec.ParentRef)
		case !gateways[key(rule.Spec.ParentRef.Namespace, rule.Spec.ParentRef.Name)]:
			t.Errorf("%s names %s/%s, not a Gateway of the plan's class", rule.Name, rule.Spec.ParentRef.Namespace, rule.Spec.ParentRef.Name)
		case !services[key(rule.Namespace, rule.Spec.Service.Name)] || rule.Spec.Service.Name == istio.Spec.Service.Name:
			t.Errorf("%s routes to %s, not a Service of its own", rule.Name, rule.Spec.Service.Name)
		case !reflect.DeepEqual(rule.Spec.Rules, istio.Spec.Rules):
			t.Errorf("%s has other rules than %s", rule.Name, istio.Name)
		case p.routeJWT[key(rule.Namespace, rule.Name)] != p.jwt[key(istio.Namespace, istio.Name)]:
			t.Errorf("%s and %s differ in JWT", rule.Name, istio.Name)
		}
		for _, r := range []*gatewayv1alpha1.APIRule{istio, rule} {
			for _, h := range r.Spec.Hosts {
				if hosts[string(h)] {
					t.Errorf("host %s twice: one owner per host across both modes", h)
				}
				hosts[string(h)] = true
			}
			if names[key(r.Namespace, r.Name)] {
				t.Errorf("APIRule %s/%s twice", r.Namespace, r.Name)
			}
			names[key(r.Namespace, r.Name)] = true
		}
	}
}
