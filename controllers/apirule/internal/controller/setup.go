package controller

import (
	"context"
	"slices"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
	"github.com/portico-dev/portico/controllers/apirule/internal/translate"
)

const (
	serviceIndex = "apirule.services"
	// gatewayIndex finds the APIRules by the gateway they name, as
	// <namespace>/<name>, or defaultGatewayKey when they name none.
	gatewayIndex = "apirule.gateway"
	// defaultGatewayKey is gatewayIndex's key of the APIRules on the
	// default gateway; without a "/" it is no gateway's name.
	defaultGatewayKey = "default"
	// zoneIndex finds the APIRules whose hosts may overlap a host: those
	// that share its zone (hosts.Zone).
	zoneIndex = "apirule.zones"
)

// ConfigureCache narrows what the controller caches: of the Istio kinds it
// writes, only the objects it labelled. Others' objects are read past the
// cache, only when they hold a name the controller needs.
func ConfigureCache(opts *cache.Options, serviceEntries, workloadEntries bool) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{translate.LabelManagedBy: translate.ManagedBy})}
	opts.ByObject[&networkingv1.VirtualService{}] = managed
	opts.ByObject[&securityv1.AuthorizationPolicy{}] = managed
	opts.ByObject[&securityv1.RequestAuthentication{}] = managed
	opts.ByObject[&discoveryv1.EndpointSlice{}] = cache.ByObject{Transform: stripEndpointSlice}
	if serviceEntries {
		opts.ByObject[&networkingv1.ServiceEntry{}] = cache.ByObject{Transform: stripServiceEntry}
	}
	if workloadEntries {
		opts.ByObject[&networkingv1.WorkloadEntry{}] = cache.ByObject{Transform: stripWorkloadEntry}
	}
}

// stripEndpointSlice keeps what the alias check reads: the slice's
// identity and labels, and each endpoint's target.
func stripEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, ResourceVersion: s.ResourceVersion, UID: s.UID,
	}}
	for _, ep := range s.Endpoints {
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{TargetRef: ep.TargetRef})
	}
	return out, nil
}

// stripWorkloadEntry keeps a WorkloadEntry's identity and labels.
func stripWorkloadEntry(obj any) (any, error) {
	we, ok := obj.(*networkingv1.WorkloadEntry)
	if !ok {
		return obj, nil
	}
	return &networkingv1.WorkloadEntry{TypeMeta: we.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: we.Name, Namespace: we.Namespace, Labels: we.Labels, ResourceVersion: we.ResourceVersion, UID: we.UID,
	}}, nil
}

// stripServiceEntry keeps a ServiceEntry's identity and hosts.
func stripServiceEntry(obj any) (any, error) {
	se, ok := obj.(*networkingv1.ServiceEntry)
	if !ok {
		return obj, nil
	}
	out := &networkingv1.ServiceEntry{TypeMeta: se.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: se.Name, Namespace: se.Namespace, ResourceVersion: se.ResourceVersion, UID: se.UID,
	}}
	out.Spec.Hosts = se.Spec.Hosts
	return out, nil
}

// SetupWithManager registers the reconciler and its watches: APIRules, the
// Istio objects they labelled (in any namespace), the Services they route
// to and, when checked, the Gateways they use and the APIGateway (grants
// and the default gateway).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &gatewayv1alpha1.APIRule{}, serviceIndex, func(o client.Object) []string {
		var keys []string
		for _, s := range translate.Backends(o.(*gatewayv1alpha1.APIRule)) {
			keys = append(keys, s.String())
		}
		return keys
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &gatewayv1alpha1.APIRule{}, gatewayIndex, func(o client.Object) []string {
		if gw := o.(*gatewayv1alpha1.APIRule).Spec.Gateway; gw != "" {
			return []string{gw}
		}
		return []string{defaultGatewayKey}
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &gatewayv1alpha1.APIRule{}, zoneIndex, func(o client.Object) []string {
		return zonesOf(o.(*gatewayv1alpha1.APIRule))
	}); err != nil {
		return err
	}
	byIndex := func(index string) handler.MapFunc {
		return func(ctx context.Context, o client.Object) []reconcile.Request {
			var rules gatewayv1alpha1.APIRuleList
			if err := mgr.GetClient().List(ctx, &rules, client.MatchingFields{index: o.GetNamespace() + "/" + o.GetName()}); err != nil {
				return nil
			}
			reqs := make([]reconcile.Request, 0, len(rules.Items))
			for _, rule := range rules.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rule)})
			}
			return reqs
		}
	}
	// Objects in other namespaces have no owner reference: their labels name
	// the APIRule (older objects lack the namespace label: they live in
	// their APIRule's namespace).
	toAPIRule := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return toAPIRuleRequests(o)
	})
	list := func(ctx context.Context, opts ...client.ListOption) []gatewayv1alpha1.APIRule {
		var rules gatewayv1alpha1.APIRuleList
		// Read-only: share the cache's objects rather than copy them all.
		if err := mgr.GetClient().List(ctx, &rules, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
			return nil
		}
		return rules.Items
	}
	requests := func(rules []gatewayv1alpha1.APIRule, keep func(*gatewayv1alpha1.APIRule) bool) []reconcile.Request {
		var reqs []reconcile.Request
		for i := range rules {
			if keep == nil || keep(&rules[i]) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rules[i])})
			}
		}
		return reqs
	}
	// A host's claimants: when one comes or goes, the others decide again.
	sameZone := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		changed := o.(*gatewayv1alpha1.APIRule)
		var reqs []reconcile.Request
		for _, zone := range zonesOf(changed) {
			reqs = append(reqs, requests(list(ctx, client.MatchingFields{zoneIndex: zone}), func(a *gatewayv1alpha1.APIRule) bool {
				return a.UID != changed.UID && hostsOverlap(a, changed)
			})...)
		}
		return reqs
	})
	// Policies going away may end an AccessConflict of the namespace.
	inConflict := func(ctx context.Context, o client.Object) []reconcile.Request {
		return requests(list(ctx, client.InNamespace(o.GetNamespace())), func(a *gatewayv1alpha1.APIRule) bool {
			c := meta.FindStatusCondition(a.Status.Conditions, gatewayv1alpha1.ConditionReady)
			return c != nil && c.Reason == gatewayv1alpha1.ReasonAccessConflict
		})
	}
	policyEvents := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return append(toAPIRuleRequests(o), inConflict(ctx, o)...)
	})
	// The APIGateway's grants concern the APIRules with wildcard hosts, its
	// default gateway those that name no gateway.
	apiGateway := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return requests(list(ctx), func(a *gatewayv1alpha1.APIRule) bool {
			return a.Spec.Gateway == "" ||
				slices.ContainsFunc(a.Spec.Hosts, func(h gatewayv1alpha1.Hostname) bool { return hosts.IsWildcard(string(h)) })
		})
	})
	// A Gateway concerns the APIRules naming it and, when it may be the
	// default gateway (its name is; its namespace is the APIGateway's to
	// say), those naming none.
	gateways := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		reqs := byIndex(gatewayIndex)(ctx, o)
		if o.GetName() == operatorv1alpha1.DefaultGatewayName {
			reqs = append(reqs, requests(list(ctx, client.MatchingFields{gatewayIndex: defaultGatewayKey}), nil)...)
		}
		return reqs
	})
	endpoints := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		svc := o.GetLabels()[discoveryv1.LabelServiceName]
		if svc == "" {
			return nil
		}
		return requests(list(ctx, client.MatchingFields{serviceIndex: o.GetNamespace() + "/" + svc}), nil)
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("apirule").
		// APIRules are independent; the API server's write latency, not the
		// controller, bounds one worker (measured by make bench-controllers).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&gatewayv1alpha1.APIRule{}).
		Watches(&gatewayv1alpha1.APIRule{}, sameZone).
		Watches(&networkingv1.VirtualService{}, toAPIRule).
		Watches(&securityv1.AuthorizationPolicy{}, policyEvents).
		Watches(&securityv1.RequestAuthentication{}, policyEvents).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(byIndex(serviceIndex))).
		Watches(&discoveryv1.EndpointSlice{}, endpoints)
	if r.ReadGrants {
		// Its spec matters, and of its status only which default gateway
		// the gateway controller keeps (APIGateway.DefaultGateway): the rest
		// of the status changes nothing for APIRules.
		b = b.Watches(&operatorv1alpha1.APIGateway{}, apiGateway, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				before, _, _ := e.ObjectOld.(*operatorv1alpha1.APIGateway).DefaultGateway()
				after, _, _ := e.ObjectNew.(*operatorv1alpha1.APIGateway).DefaultGateway()
				return before != after
			}},
		)))
	}
	if r.CheckGateways {
		// A Gateway that appears ends a GatewayNotFound (the default
		// gateway's, above all, which its controller may create after the
		// APIRules); one that goes makes its APIRules report it.
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Gateway"))
		b = b.Watches(gw, gateways)
	}
	everyAPIRule := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return requests(list(ctx), nil)
	})
	// ServiceEntries and WorkloadEntries are rare, and a ServiceEntry's
	// hosts may be wildcards: every APIRule looks again.
	if r.CheckServiceEntries {
		b = b.Watches(&networkingv1.ServiceEntry{}, everyAPIRule)
	}
	if r.CheckWorkloadEntries {
		b = b.Watches(&networkingv1.WorkloadEntry{}, everyAPIRule)
	}
	return b.Complete(r)
}

// toAPIRuleRequests maps an object the controller labelled to its APIRule.
func toAPIRuleRequests(o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[translate.LabelManagedBy] != translate.ManagedBy || l[translate.LabelAPIRule] == "" {
		return nil
	}
	ns := l[translate.LabelAPIRuleNamespace]
	if ns == "" {
		ns = o.GetNamespace()
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: l[translate.LabelAPIRule]}}}
}
