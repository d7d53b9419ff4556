package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Labels on every EnvoyFilter the ratelimit controller writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ratelimit-controller"
	LabelWorkload  = "gateway.portico.dev/workload"
)

// Gateway is an Istio Gateway: where it lives and which workload it selects.
type Gateway struct {
	Namespace string
	Name      string
	Selector  map[string]string
}

// APIRule is the part of an APIRule the topology needs.
type APIRule struct {
	Namespace string
	Name      string
	// Gateway is the Istio Gateway as <namespace>/<name>.
	Gateway string
	Rules   []gatewayv1alpha1.Rule
}

// Policy is one RateLimit.
type Policy struct {
	Namespace string
	Name      string
	Created   time.Time
	Spec      gatewayv1alpha1.RateLimitSpec
}

// Input is the state of the world.
type Input struct {
	Gateways []Gateway
	APIRules []APIRule
	Policies []Policy
	// GatewaysKnown and APIRulesKnown are false while the CRD of that kind is
	// not installed, so targets of that kind cannot be resolved.
	GatewaysKnown bool
	APIRulesKnown bool
}

// Verdict is a RateLimit's outcome.
type Verdict struct {
	Reason  string
	Message string
	// EnvoyFilter is namespace/name of the filter enforcing the limit.
	EnvoyFilter string
}

// Enforced reports whether the limit is in an EnvoyFilter.
func (v Verdict) Enforced() bool { return v.Reason == gatewayv1alpha1.ReasonEnforced }

// Output is the desired world.
type Output struct {
	// EnvoyFilters sorted by namespace and name.
	EnvoyFilters []*networkingv1alpha3client.EnvoyFilter
	Verdicts     map[types.NamespacedName]Verdict
}

// workload identifies the pods a set of gateways configures.
type workload struct {
	namespace string
	selector  map[string]string
	gateways  []string // names, sorted
}

func selectorKey(s map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, k+"="+s[k])
	}
	return strings.Join(parts, ",")
}

// WorkloadID is a short stable identifier of a workload, used in names.
func WorkloadID(namespace string, selector map[string]string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + selectorKey(selector)))
	return hex.EncodeToString(sum[:])[:10]
}

// EnvoyFilterName is the name of a workload's EnvoyFilter.
func EnvoyFilterName(namespace string, selector map[string]string) string {
	return "portico-ratelimit-" + WorkloadID(namespace, selector)
}

// claim is one rate-limited scope of a workload.
type claim struct {
	policy types.NamespacedName
	scope  string // "gateway" or "route:<name>"
	route  string // route name for route scopes
	spec   gatewayv1alpha1.RateLimitSpec
}

// Compute derives the desired EnvoyFilters and verdicts.
func Compute(in Input) Output {
	out := Output{Verdicts: map[types.NamespacedName]Verdict{}}

	workloads := map[string]*workload{} // by namespace/selectorKey
	gatewayWorkload := map[string]*workload{}
	for _, g := range sortedGateways(in.Gateways) {
		if len(g.Selector) == 0 {
			continue // selects nothing Portico can address
		}
		key := g.Namespace + "/" + selectorKey(g.Selector)
		w, ok := workloads[key]
		if !ok {
			w = &workload{namespace: g.Namespace, selector: g.Selector}
			workloads[key] = w
		}
		w.gateways = append(w.gateways, g.Name)
		gatewayWorkload[g.Namespace+"/"+g.Name] = w
	}
	apiRules := map[string]APIRule{}
	for _, r := range in.APIRules {
		apiRules[r.Namespace+"/"+r.Name] = r
	}

	policies := slices.Clone(in.Policies)
	sort.SliceStable(policies, func(i, j int) bool {
		a, b := policies[i], policies[j]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})

	claims := map[*workload][]claim{}
	owner := map[string]types.NamespacedName{} // workload key + scope -> winner
	for _, p := range policies {
		id := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		w, scopes, notFound := resolve(in, p, gatewayWorkload, apiRules)
		if notFound != "" {
			out.Verdicts[id] = Verdict{Reason: gatewayv1alpha1.ReasonTargetNotFound, Message: notFound}
			continue
		}
		wkey := w.namespace + "/" + selectorKey(w.selector)
		var lostTo *types.NamespacedName
		var lostScope string
		for _, s := range scopes {
			if winner, taken := owner[wkey+"|"+s.scope]; taken {
				lostTo, lostScope = &winner, s.scope
				break
			}
		}
		if lostTo != nil {
			out.Verdicts[id] = Verdict{Reason: gatewayv1alpha1.ReasonConflicted, Message: fmt.Sprintf(
				"%s is already limited by the older RateLimit %s; this one is not applied", describe(lostScope, w), lostTo)}
			continue
		}
		for _, s := range scopes {
			owner[wkey+"|"+s.scope] = id
			s.policy = id
			claims[w] = append(claims[w], s)
		}
		out.Verdicts[id] = Verdict{
			Reason:      gatewayv1alpha1.ReasonEnforced,
			Message:     fmt.Sprintf("enforced by EnvoyFilter %s/%s on the workload of gateway(s) %s", w.namespace, EnvoyFilterName(w.namespace, w.selector), strings.Join(w.gateways, ", ")),
			EnvoyFilter: w.namespace + "/" + EnvoyFilterName(w.namespace, w.selector),
		}
	}

	for _, w := range workloads {
		if len(claims[w]) == 0 {
			continue
		}
		out.EnvoyFilters = append(out.EnvoyFilters, envoyFilter(w, claims[w]))
	}
	sort.Slice(out.EnvoyFilters, func(i, j int) bool {
		return out.EnvoyFilters[i].Namespace+"/"+out.EnvoyFilters[i].Name < out.EnvoyFilters[j].Namespace+"/"+out.EnvoyFilters[j].Name
	})
	return out
}

func sortedGateways(gs []Gateway) []Gateway {
	gs = slices.Clone(gs)
	sort.Slice(gs, func(i, j int) bool { return gs[i].Namespace+"/"+gs[i].Name < gs[j].Namespace+"/"+gs[j].Name })
	return gs
}

func describe(scope string, w *workload) string {
	if scope == "gateway" {
		return fmt.Sprintf("gateway %s/%s", w.namespace, strings.Join(w.gateways, ","))
	}
	return fmt.Sprintf("route %s on gateway %s/%s", strings.TrimPrefix(scope, "route:"), w.namespace, strings.Join(w.gateways, ","))
}

// resolve finds a policy's workload and the scopes it claims, or says why
// its target cannot be found.
func resolve(in Input, p Policy, gateways map[string]*workload, apiRules map[string]APIRule) (*workload, []claim, string) {
	switch p.Spec.TargetRef.Kind {
	case gatewayv1alpha1.TargetGateway:
		if !in.GatewaysKnown {
			return nil, nil, "Istio's Gateway CRD (gateways.networking.istio.io) is not installed"
		}
		w, ok := gateways[p.Namespace+"/"+p.Spec.TargetRef.Name]
		if !ok {
			return nil, nil, fmt.Sprintf("Istio gateway %s/%s not found (or it selects no workload)", p.Namespace, p.Spec.TargetRef.Name)
		}
		return w, []claim{{scope: "gateway", spec: p.Spec}}, ""
	case gatewayv1alpha1.TargetAPIRule:
		if !in.APIRulesKnown {
			return nil, nil, "the APIRule CRD (apirules.gateway.portico.dev) is not installed"
		}
		rule, ok := apiRules[p.Namespace+"/"+p.Spec.TargetRef.Name]
		if !ok {
			return nil, nil, fmt.Sprintf("APIRule %s/%s not found", p.Namespace, p.Spec.TargetRef.Name)
		}
		if !in.GatewaysKnown {
			return nil, nil, "Istio's Gateway CRD (gateways.networking.istio.io) is not installed"
		}
		w, ok := gateways[rule.Gateway]
		if !ok {
			return nil, nil, fmt.Sprintf("Istio gateway %s of APIRule %s/%s not found (or it selects no workload)", rule.Gateway, rule.Namespace, rule.Name)
		}
		var scopes []claim
		for _, r := range rule.Rules {
			name := gatewayv1alpha1.RouteName(rule.Namespace, rule.Name, r)
			scopes = append(scopes, claim{scope: "route:" + name, route: name, spec: p.Spec})
		}
		sort.Slice(scopes, func(i, j int) bool { return scopes[i].route < scopes[j].route })
		return w, scopes, ""
	}
	return nil, nil, fmt.Sprintf("unknown target kind %q", p.Spec.TargetRef.Kind)
}

func envoyFilter(w *workload, claims []claim) *networkingv1alpha3client.EnvoyFilter {
	var gatewayClaim *claim
	var routeClaims []claim
	for i := range claims {
		if claims[i].scope == "gateway" {
			gatewayClaim = &claims[i]
		} else {
			routeClaims = append(routeClaims, claims[i])
		}
	}
	sort.Slice(routeClaims, func(i, j int) bool { return routeClaims[i].route < routeClaims[j].route })

	ef := &networkingv1alpha3client.EnvoyFilter{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.istio.io/v1alpha3", Kind: "EnvoyFilter"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      EnvoyFilterName(w.namespace, w.selector),
			Namespace: w.namespace,
			Labels:    map[string]string{LabelManagedBy: ManagedBy, LabelWorkload: WorkloadID(w.namespace, w.selector)},
		},
	}
	// Proto messages must not be copied: fill the object's spec in place.
	spec := &ef.Spec
	spec.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: maps.Clone(w.selector)}
	spec.ConfigPatches = append(spec.ConfigPatches, listenerFilterPatch(gatewayClaim))
	if gatewayClaim != nil && len(gatewayClaim.spec.Descriptors) > 0 {
		spec.ConfigPatches = append(spec.ConfigPatches, virtualHostPatch(gatewayClaim))
	}
	for _, c := range routeClaims {
		spec.ConfigPatches = append(spec.ConfigPatches, routePatch(c))
	}
	return ef
}
