package controller

import (
	"context"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
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

// SetupWithManager registers the reconciler and its watches: APIRules, the
// Istio objects they own, the Services they route to and, when checked, the
// Gateways they use.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &gatewayv1alpha1.APIRule{}, serviceIndex, func(o client.Object) []string {
		var keys []string
		for _, s := range translate.Services(o.(*gatewayv1alpha1.APIRule)) {
			keys = append(keys, s.Namespace+"/"+s.Name)
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
	b := ctrl.NewControllerManagedBy(mgr).
		Named("apirule").
		// APIRules are independent; the API server's write latency, not the
		// controller, bounds one worker (measured by make bench-controllers).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&gatewayv1alpha1.APIRule{}).
		Owns(&networkingv1.VirtualService{}).
		Owns(&securityv1.AuthorizationPolicy{}).
		Owns(&securityv1.RequestAuthentication{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(byIndex(serviceIndex)))
	if r.CheckGateways {
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Gateway"))
		b = b.Watches(gw, handler.EnqueueRequestsFromMapFunc(byIndex(gatewayIndex)))
	}
	return b.Complete(r)
}
