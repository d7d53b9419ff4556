package translate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// destination is one Service port a rule routes to, with its percentage of
// the rule's requests; weight is 0 for a rule's only Service, which
// receives them all.
type destination struct {
	service gatewayv1alpha1.ServiceReference
	weight  int32
}

// destinationsOf returns the Service ports a rule routes to: its weighted
// backends, or its one service (the rule's own or spec.service).
func destinationsOf(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) []destination {
	if len(rule.Backends) == 0 {
		return []destination{{service: serviceOf(r, rule)}}
	}
	out := make([]destination, 0, len(rule.Backends))
	for _, b := range rule.Backends {
		out = append(out, destination{service: withNamespace(b.Service, r.Namespace), weight: b.Weight})
	}
	return out
}

// backendsOf returns the Services a rule routes to, in the rule's order:
// the workloads its access rules must be on.
func backendsOf(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) []types.NamespacedName {
	var out []types.NamespacedName
	for _, d := range destinationsOf(r, rule) {
		key := types.NamespacedName{Namespace: d.service.Namespace, Name: d.service.Name}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// servesBackend reports whether a rule routes requests to backend, with
// whatever weight: a backend of weight 0 keeps its access rules, so that
// raising its weight never routes to pods without them.
func servesBackend(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule, backend types.NamespacedName) bool {
	return slices.Contains(backendsOf(r, rule), backend)
}

// sharedWorkload returns a backend of rule b that may share pods with a
// backend of rule a: a rule with backends serves every one of them, so two
// rules meet on the pods of any pair.
func sharedWorkload(r *gatewayv1alpha1.APIRule, a, b gatewayv1alpha1.Rule, selectors map[types.NamespacedName]map[string]string) (types.NamespacedName, bool) {
	for _, wb := range backendsOf(r, b) {
		for _, wa := range backendsOf(r, a) {
			if MayShareWorkload(wa, selectors[wa], wb, selectors[wb]) {
				return wb, true
			}
		}
	}
	return types.NamespacedName{}, false
}

// checkBackends refuses weighted backends that the API server refuses too
// (the controller must not rely on it): with a service, weights that are
// not percentages adding up to 100, and a Service port listed twice, also
// once with and once without the APIRule's namespace.
func checkBackends(r *gatewayv1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		if len(rule.Backends) == 0 {
			continue
		}
		if rule.Service != nil {
			return fmt.Errorf("rule %s has both service and backends; set one", rule.Path)
		}
		if n := len(rule.Backends); n < 2 || n > gatewayv1alpha1.MaxWeightedBackends {
			return fmt.Errorf("rule %s has %d backends; a rule splits its requests between 2 and %d", rule.Path, n, gatewayv1alpha1.MaxWeightedBackends)
		}
		var sum int32
		seen := map[gatewayv1alpha1.ServiceReference]bool{}
		for _, d := range destinationsOf(r, rule) {
			if d.weight < 0 || d.weight > 100 {
				return fmt.Errorf("rule %s gives backend %s/%s the weight %d; weights are percentages from 0 to 100", rule.Path, d.service.Namespace, d.service.Name, d.weight)
			}
			if seen[d.service] {
				return fmt.Errorf("rule %s lists backend %s/%s port %d twice; give it the sum of the weights once", rule.Path, d.service.Namespace, d.service.Name, d.service.Port)
			}
			seen[d.service] = true
			sum += d.weight
		}
		if sum != 100 {
			return fmt.Errorf("the weights of rule %s's backends add up to %d; they are percentages of its requests and must add up to 100", rule.Path, sum)
		}
	}
	return nil
}
