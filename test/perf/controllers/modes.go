package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

const (
	// maxRouteRatio bounds HTTPRoute mode's convergence time as a multiple
	// of Istio mode's, both of the same run: HTTPRoute mode takes one
	// more reconcile and status write per APIRule (the Gateway's answer
	// starts it), not a different order of work.
	maxRouteRatio = 3.0
	// gatedAPIRules is the fewest APIRules whose ratio is checked against
	// maxRouteRatio (the short mode's few converge too fast for a ratio to
	// mean anything).
	gatedAPIRules = 100
	// maxUnready bounds the APIRules an error names.
	maxUnready = 5
)

// modeRatio is HTTPRoute mode's figures over Istio mode's, of one run.
type modeRatio struct {
	converge, requestsPerObject float64
}

func ratioOf(istio, route *result) modeRatio {
	return modeRatio{
		converge:          route.converge.Seconds() / max(istio.converge.Seconds(), 1e-9),
		requestsPerObject: route.requestsPerObject() / max(istio.requestsPerObject(), 1e-9),
	}
}

// compareModes notes HTTPRoute mode's convergence time and API requests
// per APIRule against Istio mode's and, with at least gatedAPIRules,
// fails when the time exceeds maxRouteRatio times Istio mode's.
func (b *bench) compareModes(_ context.Context, res results) error {
	istio, route := res.find(string(contract.APIRule.Name), modeIstio), res.find(string(contract.APIRule.Name), modeHTTPRoute)
	if istio == nil || route == nil {
		return errors.New("the APIRule phases of both modes must have run")
	}
	r := ratioOf(istio, route)
	route.notes = append(route.notes, fmt.Sprintf(
		"HTTPRoute mode / Istio mode (same run): convergence %.2f× (%.2fs / %.2fs), API requests per APIRule %.2f× (%.2f / %.2f)",
		r.converge, route.converge.Seconds(), istio.converge.Seconds(),
		r.requestsPerObject, route.requestsPerObject(), istio.requestsPerObject()))
	if len(b.plan.routeRules) >= gatedAPIRules && r.converge > maxRouteRatio {
		return fmt.Errorf("HTTPRoute mode took %.2f× Istio mode's time to converge %d APIRules (%.2fs / %.2fs), more than %.0f×",
			r.converge, len(b.plan.routeRules), route.converge.Seconds(), istio.converge.Seconds(), maxRouteRatio)
	}
	return nil
}

// verifyRoutes reads, from the API server, every HTTPRoute-mode APIRule
// and the HTTPRoutes of the bench's namespaces: each APIRule must be
// Ready (Applied) for its generation, with an HTTPRoute of its name that
// it owns and that carries the stand-in's answer for its generation.
func (b *bench) verifyRoutes(ctx context.Context) error {
	rules, routes := map[string]*gatewayv1alpha1.APIRule{}, map[string]*gatewayapiv1.HTTPRoute{}
	for _, ns := range b.plan.namespaces {
		var rl gatewayv1alpha1.APIRuleList
		var hl gatewayapiv1.HTTPRouteList
		if err := b.c.List(ctx, &rl, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the APIRules of %s: %w", ns, err)
		}
		if err := b.c.List(ctx, &hl, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the HTTPRoutes of %s: %w", ns, err)
		}
		for i := range rl.Items {
			rules[key(ns, rl.Items[i].Name)] = &rl.Items[i]
		}
		for i := range hl.Items {
			routes[key(ns, hl.Items[i].Name)] = &hl.Items[i]
		}
	}
	var wrong []string
	for _, want := range b.plan.routeRules {
		k := key(want.Namespace, want.Name)
		if problem := routeProblem(rules[k], routes[k]); problem != "" {
			wrong = append(wrong, k+": "+problem)
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%d of %d HTTPRoute-mode APIRules are not Ready with their accepted HTTPRoute: %s",
			len(wrong), len(b.plan.routeRules), strings.Join(wrong[:min(len(wrong), maxUnready)], "; "))
	}
	return nil
}

// routeProblem says what is wrong with an HTTPRoute-mode APIRule and its
// route, or "".
func routeProblem(rule *gatewayv1alpha1.APIRule, route *gatewayapiv1.HTTPRoute) string {
	if rule == nil {
		return "APIRule missing"
	}
	c := meta.FindStatusCondition(rule.Status.Conditions, gatewayv1alpha1.ConditionReady)
	switch {
	case c == nil:
		return "no Ready condition"
	case c.Status != metav1.ConditionTrue || c.Reason != gatewayv1alpha1.ReasonApplied || c.ObservedGeneration != rule.Generation:
		return fmt.Sprintf("Ready=%s %s for generation %d of %d: %s", c.Status, c.Reason, c.ObservedGeneration, rule.Generation, c.Message)
	case route == nil:
		return "no HTTPRoute"
	case !metav1.IsControlledBy(route, rule):
		return "its HTTPRoute is not controlled by it"
	case len(route.Spec.ParentRefs) != 1 || !answered(route, route.Spec.ParentRefs):
		return "its HTTPRoute does not carry the Gateway's answer for its generation"
	}
	return ""
}
