package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

// The cache's field indexes: with them an event or a reconcile looks up the
// few objects it concerns instead of walking every APIRule or Gateway of
// the cluster.
const (
	// targetIndex keys a RateLimit by the name of the APIRule it targets,
	// in its own namespace (none for a Gateway target).
	targetIndex = "ratelimit.targetAPIRule"
	// selectorIndex keys an Istio Gateway by one label of its selector,
	// key=value: every pod the Gateway selects carries it.
	selectorIndex = "ratelimit.selectorLabel"
)

// targetKeys is targetIndex's key of a RateLimit.
func targetKeys(o client.Object) []string {
	l, ok := o.(*gatewayv1alpha1.RateLimit)
	if !ok || !topology.TargetsAPIRule(l.Spec.TargetRef) {
		return nil
	}
	return []string{l.Spec.TargetRef.Name}
}

// selectorKeys is selectorIndex's key of an Istio Gateway: the label of
// its selector with the smallest key. A Gateway without a selector selects
// no pod and has none.
func selectorKeys(o client.Object) []string {
	g, ok := o.(*networkingv1.Gateway)
	if !ok || len(g.Spec.Selector) == 0 {
		return nil
	}
	k := slices.Min(slices.Collect(maps.Keys(g.Spec.Selector)))
	return []string{labelKey(k, g.Spec.Selector[k])}
}

// labelKey is a label as selectorIndex keys it; "=" occurs in neither a
// label's key nor its value.
func labelKey(k, v string) string { return k + "=" + v }

// setupIndexes registers the field indexes the controller's watches and
// reconciles read.
func (r *Reconciler) setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if r.APIRulesKnown {
		if err := indexer.IndexField(ctx, &gatewayv1alpha1.RateLimit{}, targetIndex, targetKeys); err != nil {
			return fmt.Errorf("index RateLimits by target: %w", err)
		}
	}
	if r.GatewaysKnown {
		if err := indexer.IndexField(ctx, &networkingv1.Gateway{}, selectorIndex, selectorKeys); err != nil {
			return fmt.Errorf("index Istio Gateways by selector: %w", err)
		}
	}
	return nil
}

// istioGatewaySelects reports whether an Istio Gateway selects a pod with
// these labels: one index lookup per label, then the full selector of the
// few Gateways found. Errors are reported as a match: the reconcile
// decides.
func (r *Reconciler) istioGatewaySelects(ctx context.Context, podLabels map[string]string) bool {
	for k, v := range podLabels {
		var gateways networkingv1.GatewayList
		if err := r.Client.List(ctx, &gateways, client.MatchingFields{selectorIndex: labelKey(k, v)}, client.UnsafeDisableDeepCopy); err != nil {
			return true
		}
		for _, g := range gateways.Items {
			if len(g.Spec.Selector) > 0 && labels.SelectorFromSet(g.Spec.Selector).Matches(labels.Set(podLabels)) {
				return true
			}
		}
	}
	return false
}

// targeted maps an APIRule's event to the World key when a RateLimit
// targets the APIRule, to nothing otherwise: the topology reads no other
// APIRule, so a bulk of APIRules nobody limits queues nothing. A RateLimit
// that arrives after its APIRule reconciles on its own event and finds the
// APIRule in the cache then.
func (r *Reconciler) targeted(ctx context.Context, o client.Object) []reconcile.Request {
	var limits gatewayv1alpha1.RateLimitList
	err := r.Client.List(ctx, &limits, client.InNamespace(o.GetNamespace()), client.MatchingFields{targetIndex: o.GetName()}, client.UnsafeDisableDeepCopy)
	if err != nil || len(limits.Items) > 0 {
		return []reconcile.Request{World}
	}
	return nil
}

// apiRuleRead is the part of an APIRule the topology reads: where it is
// served (gateway, parentRef, hosts) and its rules' paths and methods,
// which name its Envoy routes (gatewayv1alpha1.RouteName,
// HTTPRouteRuleName).
func apiRuleRead(a *gatewayv1alpha1.APIRule) gatewayv1alpha1.APIRuleSpec {
	spec := gatewayv1alpha1.APIRuleSpec{Hosts: a.Spec.Hosts, Gateway: a.Spec.Gateway, ParentRef: a.Spec.ParentRef}
	if a.Spec.Rules != nil {
		spec.Rules = make([]gatewayv1alpha1.Rule, len(a.Spec.Rules))
		for i, rule := range a.Spec.Rules {
			spec.Rules[i] = gatewayv1alpha1.Rule{Path: rule.Path, Methods: rule.Methods}
		}
	}
	return spec
}

// StripAPIRule keeps of an APIRule what the topology reads (apiRuleRead)
// and the metadata the informer needs: its status, written at every
// APIRule's reconcile, and the rest of its spec stay out of the cache.
func StripAPIRule(obj any) (any, error) {
	a, ok := obj.(*gatewayv1alpha1.APIRule)
	if !ok {
		return obj, nil // a tombstone: passed through
	}
	return &gatewayv1alpha1.APIRule{TypeMeta: a.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: a.Name, Namespace: a.Namespace, UID: a.UID, ResourceVersion: a.ResourceVersion,
		Generation: a.Generation, DeletionTimestamp: a.DeletionTimestamp,
	}, Spec: apiRuleRead(a)}, nil
}

// apiRuleEvents passes an APIRule's creation and deletion, and an update
// only when what the topology reads changed: not the status writes of the
// apirule controller, which at a bulk create are one per APIRule.
func apiRuleEvents() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*gatewayv1alpha1.APIRule)
			updated, okNew := e.ObjectNew.(*gatewayv1alpha1.APIRule)
			return !okOld || !okNew || !equality.Semantic.DeepEqual(apiRuleRead(old), apiRuleRead(updated))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
