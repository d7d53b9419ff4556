package controller

import (
	"context"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/translate"
)

const (
	serviceIndex = "apirule.services"
	gatewayIndex = "apirule.gateway"
)

// ConfigureCache narrows what the controller caches: of the Istio kinds it
// writes, only the objects it labelled. Others' objects are read past the
// cache, only when they hold a name the controller needs.
func ConfigureCache(opts *cache.Options) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{translate.LabelManagedBy: translate.ManagedBy})}
	opts.ByObject[&networkingv1.VirtualService{}] = managed
	opts.ByObject[&securityv1.AuthorizationPolicy{}] = managed
	opts.ByObject[&securityv1.RequestAuthentication{}] = managed
}

// SetupWithManager registers the reconciler and its watches: APIRules, the
// Istio objects they labelled (in any namespace), the Services they route
// to and, when checked, the Gateways they use.
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
		return []string{o.(*gatewayv1alpha1.APIRule).Spec.Gateway}
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
		l := o.GetLabels()
		if l[translate.LabelManagedBy] != translate.ManagedBy || l[translate.LabelAPIRule] == "" {
			return nil
		}
		ns := l[translate.LabelAPIRuleNamespace]
		if ns == "" {
			ns = o.GetNamespace()
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: l[translate.LabelAPIRule]}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("apirule").
		// APIRules are independent; the API server's write latency, not the
		// controller, bounds one worker (measured by make bench-controllers).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&gatewayv1alpha1.APIRule{}).
		Watches(&networkingv1.VirtualService{}, toAPIRule).
		Watches(&securityv1.AuthorizationPolicy{}, toAPIRule).
		Watches(&securityv1.RequestAuthentication{}, toAPIRule).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(byIndex(serviceIndex)))
	if r.CheckGateways {
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Gateway"))
		b = b.Watches(gw, handler.EnqueueRequestsFromMapFunc(byIndex(gatewayIndex)))
	}
	return b.Complete(r)
}
