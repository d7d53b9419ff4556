package main

import (
	"fmt"
	"time"

	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

const (
	// benchLabel marks every object (and namespace) the bench creates, so
	// the next run can remove what an interrupted one left.
	benchLabel      = "portico.dev/bench"
	benchLabelValue = "controllers"
	// gatewayNS holds the Gateways, their pods and the gateway-wide
	// RateLimits: Istio's root namespace, where the ratelimit controller
	// writes the EnvoyFilters for pods that do not run in a RateLimit's own
	// namespace.
	gatewayNS = "istio-system"
	// gatewaySelectorKey is the label every bench Gateway selects its pod
	// by, each with its own value.
	gatewaySelectorKey = "istio"
	// rulesPerAPIRule is the number of rules (so Envoy routes) of every
	// APIRule the bench creates.
	rulesPerAPIRule = 2
	// standInController is the controllerName of the bench's GatewayClass:
	// the bench's stand-in for a Gateway API implementation (standin.go)
	// answers the HTTPRoutes on its Gateways under this name.
	standInController = "bench.portico.dev/gateway"
	// gatewayClassName is the GatewayClass of the bench's Gateway API
	// Gateways.
	gatewayClassName = "portico-bench"
)

// scopeGroup is a set of RateLimits that claim the same scope: exactly one
// of them ends up Enforced, the others Conflicted. An empty group marks a
// limit whose target is missing (TargetNotFound).
type scopeGroup string

// envoyFilterKey names an EnvoyFilter of the ratelimit controller by the
// namespace whose RateLimits it enforces and its gateway's selector value.
type envoyFilterKey struct{ tenant, gateway string }

// plan is every object the bench creates and what the controllers should
// make of them.
type plan struct {
	namespaces []string
	gateways   []*networkingv1.Gateway
	// pods are the Gateways' workloads, one per Gateway: a RateLimit acts
	// only on pods a Gateway selects.
	pods []*corev1.Pod
	// services are the backends of both modes' APIRules, one each.
	services []*corev1.Service
	// apiRules are Istio mode's (spec.gateway names an Istio Gateway),
	// routeRules HTTPRoute mode's (spec.parentRef names a Gateway API
	// Gateway): as many, with the same rules, on as many gateways.
	apiRules, routeRules []*gatewayv1alpha1.APIRule
	// jwt and routeJWT map each mode's APIRule keys to whether the APIRule
	// has a JWT rule (so a RequestAuthentication).
	jwt, routeJWT map[string]bool
	// gatewayClass and routeGateways are what the HTTPRoute-mode APIRules
	// name: Gateway API Gateways in gatewayNS (admitting routes of every
	// namespace) of a class that the bench's stand-in controls.
	gatewayClass  *gatewayapiv1.GatewayClass
	routeGateways []*gatewayapiv1.Gateway
	rateLimits    []*gatewayv1alpha1.RateLimit
	limits        map[string]scopeGroup // RateLimit key -> its group
	groups        int
	// envoyFilters maps every EnvoyFilter the ratelimit controller must
	// write to its number of config patches.
	envoyFilters map[envoyFilterKey]int
}

// sizes are the counts of a plan.
type sizes struct{ apiRules, rateLimits, gateways, namespaces int }

func key(namespace, name string) string { return namespace + "/" + name }

func benchLabels() map[string]string { return map[string]string{benchLabel: benchLabelValue} }

func gatewayName(g int) string { return fmt.Sprintf("bench-gw-%02d", g) }

func routeGatewayName(g int) string { return fmt.Sprintf("bench-gwapi-%02d", g) }

func newPlan(s sizes) *plan {
	p := &plan{
		jwt: map[string]bool{}, routeJWT: map[string]bool{}, limits: map[string]scopeGroup{}, envoyFilters: map[envoyFilterKey]int{},
		gatewayClass: &gatewayapiv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: gatewayClassName, Labels: benchLabels()},
			Spec:       gatewayapiv1.GatewayClassSpec{ControllerName: standInController},
		},
	}
	for i := range s.namespaces {
		p.namespaces = append(p.namespaces, fmt.Sprintf("bench-ctrl-%02d", i))
	}
	for g := range s.gateways {
		p.gateways = append(p.gateways, gateway(g))
		p.pods = append(p.pods, gatewayPod(g))
		p.routeGateways = append(p.routeGateways, routeGateway(g))
	}
	for i := range s.apiRules {
		ns := p.namespaces[i%s.namespaces]
		svc, rule := apiRule(i, ns, gatewayName(i%s.gateways))
		p.services = append(p.services, svc)
		p.apiRules = append(p.apiRules, rule)
		p.jwt[key(ns, rule.Name)] = rule.Spec.Rules[0].JWT != nil
	}
	for i := range s.apiRules {
		ns := p.namespaces[i%s.namespaces]
		svc, rule := routeAPIRule(i, ns, routeGatewayName(i%s.gateways))
		p.services = append(p.services, svc)
		p.routeRules = append(p.routeRules, rule)
		p.routeJWT[key(ns, rule.Name)] = rule.Spec.Rules[0].JWT != nil
	}
	p.planRateLimits(s)
	return p
}

// routeGateway is a Gateway API Gateway of the stand-in's class with one
// HTTP listener that admits routes of every namespace, like a shared
// ingress gateway.
func routeGateway(g int) *gatewayapiv1.Gateway {
	return &gatewayapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: routeGatewayName(g), Namespace: gatewayNS, Labels: benchLabels()},
		Spec: gatewayapiv1.GatewaySpec{GatewayClassName: gatewayClassName, Listeners: []gatewayapiv1.Listener{{
			Name: "http", Port: 80, Protocol: gatewayapiv1.HTTPProtocolType,
			AllowedRoutes: &gatewayapiv1.AllowedRoutes{Namespaces: &gatewayapiv1.RouteNamespaces{From: ptr.To(gatewayapiv1.NamespacesFromAll)}},
		}}},
	}
}

// routeAPIRule is the i-th APIRule of HTTPRoute mode and its Service:
// apiRule's rules under other names and hosts (one owner per host, across
// both modes), on the Gateway API Gateway gw of gatewayNS.
func routeAPIRule(i int, ns, gw string) (*corev1.Service, *gatewayv1alpha1.APIRule) {
	svc, rule := apiRule(i, ns, "")
	svc.Name = fmt.Sprintf("route-svc-%04d", i)
	svc.Spec.Selector = map[string]string{"app": svc.Name}
	rule.Name = fmt.Sprintf("route-%04d", i)
	rule.Spec.Hosts = []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(rule.Name + ".bench.example.com")}
	rule.Spec.Gateway = ""
	rule.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Namespace: gatewayNS, Name: gw}
	rule.Spec.Service.Name = svc.Name
	return svc, rule
}

func gateway(g int) *networkingv1.Gateway {
	return &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayName(g), Namespace: gatewayNS, Labels: benchLabels()},
		Spec: networkingapi.Gateway{
			Selector: map[string]string{gatewaySelectorKey: gatewayName(g)},
			Servers: []*networkingapi.Server{{
				Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
			}},
		},
	}
}

// gatewayPod stands in for the Gateway's ingress pod; kwok plays it.
func gatewayPod(g int) *corev1.Pod {
	labels := benchLabels()
	labels[gatewaySelectorKey] = gatewayName(g)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayName(g), Namespace: gatewayNS, Labels: labels},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: "istio-proxy", Image: "registry.k8s.io/pause:3.10"}},
			AutomountServiceAccountToken: ptr.To(false),
		},
	}
}

// apiRule returns the i-th APIRule and its headless Service: every other
// one has a JWT rule, so a RequestAuthentication too.
func apiRule(i int, ns, gw string) (*corev1.Service, *gatewayv1alpha1.APIRule) {
	svc := fmt.Sprintf("svc-%04d", i)
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: ns, Labels: benchLabels()},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": svc},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	name := fmt.Sprintf("api-%04d", i)
	orders := gatewayv1alpha1.Rule{Path: "/orders/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET", "POST"}, NoAuth: ptr.To(true)}
	if i%2 == 1 {
		orders.NoAuth = nil
		orders.JWT = &gatewayv1alpha1.JWTAuthentication{
			Issuer: "https://issuer.example.com", JWKSURI: "https://issuer.example.com/.well-known/jwks.json",
			Audiences: []string{"orders"}, RequiredScopes: []string{"orders:read"},
		}
	}
	rules := []gatewayv1alpha1.Rule{
		orders,
		{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
	}
	return service, &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: benchLabels()},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:   []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(name + ".bench.example.com")},
			Gateway: gatewayNS + "/" + gw,
			Service: &gatewayv1alpha1.ServiceReference{Name: svc, Port: 8080},
			Timeout: &metav1.Duration{Duration: 15 * time.Second},
			Rules:   rules,
		},
	}
}

// planRateLimits spreads the RateLimits over the gateways, round-robin;
// the slot is a limit's rank on its gateway. On even gateways slots 0 and 1
// limit the whole gateway (same scope: one is Enforced, one Conflicted) and
// every route limit is Conflicted, as the gateway-wide limit holds its pods
// first. On odd gateways slots 0 and 1 limit the same APIRule (one
// Enforced, one Conflicted) and the later slots distinct APIRules
// (Enforced; once the APIRules are used up they repeat). Slot 2 names a
// missing APIRule everywhere (TargetNotFound).
func (p *plan) planRateLimits(s sizes) {
	byGateway := make([][]*gatewayv1alpha1.APIRule, s.gateways)
	for i, r := range p.apiRules {
		byGateway[i%s.gateways] = append(byGateway[i%s.gateways], r)
	}
	groups := map[scopeGroup]bool{}
	gatewayWide := map[int]bool{}
	limited := map[envoyFilterKey]map[string]bool{} // APIRules with an Enforced limit
	for i := range s.rateLimits {
		g, slot := i%s.gateways, i/s.gateways
		rl := &gatewayv1alpha1.RateLimit{
			ObjectMeta: metav1.ObjectMeta{Labels: benchLabels()},
			Spec: gatewayv1alpha1.RateLimitSpec{Local: &gatewayv1alpha1.TokenBucket{
				MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second},
			}},
		}
		var group scopeGroup
		switch {
		case g%2 == 0 && slot < 2:
			rl.Namespace, rl.Name = gatewayNS, fmt.Sprintf("gw-%02d-%d", g, slot)
			rl.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetGateway, Name: gatewayName(g)}
			rl.Spec.Descriptors = []gatewayv1alpha1.Descriptor{{
				Header: &gatewayv1alpha1.HeaderMatch{Name: "x-tenant", Value: "bench"},
				Bucket: &gatewayv1alpha1.TokenBucket{MaxTokens: 10, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
			}}
			group = scopeGroup("pods:" + gatewayName(g))
			gatewayWide[g] = true
		case slot == 2 || len(byGateway[g]) == 0:
			rl.Namespace, rl.Name = p.namespaces[i%s.namespaces], fmt.Sprintf("rl-%04d", i)
			rl.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: fmt.Sprintf("missing-%04d", i)}
		default:
			target := byGateway[g][max(slot-2, 0)%len(byGateway[g])]
			rl.Namespace, rl.Name = target.Namespace, fmt.Sprintf("rl-%04d", i)
			rl.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: target.Name}
			group = scopeGroup("apirule:" + key(target.Namespace, target.Name))
			if g%2 == 0 {
				group = scopeGroup("pods:" + gatewayName(g))
				break
			}
			k := envoyFilterKey{tenant: target.Namespace, gateway: gatewayName(g)}
			if limited[k] == nil {
				limited[k] = map[string]bool{}
			}
			limited[k][target.Name] = true
		}
		if group != "" {
			groups[group] = true
		}
		p.rateLimits = append(p.rateLimits, rl)
		p.limits[key(rl.Namespace, rl.Name)] = group
	}
	p.groups = len(groups)
	p.planEnvoyFilters(gatewayWide, limited)
}

// planEnvoyFilters counts the config patches of every EnvoyFilter: the
// listener's HTTP filter, the virtual host's descriptors of a gateway-wide
// limit, and one route patch per rule of every limited APIRule.
func (p *plan) planEnvoyFilters(gatewayWide map[int]bool, limited map[envoyFilterKey]map[string]bool) {
	for g := range gatewayWide {
		p.envoyFilters[envoyFilterKey{tenant: gatewayNS, gateway: gatewayName(g)}] = 2
	}
	for k, rules := range limited {
		p.envoyFilters[k] = 1 + rulesPerAPIRule*len(rules)
	}
}
