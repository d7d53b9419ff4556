package controller

import (
	"context"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/fairqueue"
)

// ConfigureCache narrows what the controller caches: of the kinds it
// writes, only the objects it labelled, and of APIRules only their name and
// spec.gateway.
func ConfigureCache(opts *cache.Options, certManager, gatewayAPI bool) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})}
	opts.ByObject[&networkingv1.Gateway{}] = managed
	opts.ByObject[&networkingv1.VirtualService{}] = managed
	if certManager {
		opts.ByObject[&cmv1.Certificate{}] = managed
	}
	if gatewayAPI {
		opts.ByObject[&gwapiv1.Gateway{}] = managed
		opts.ByObject[&gwapiv1.HTTPRoute{}] = managed
	}
	opts.ByObject[&porticov1alpha1.APIRule{}] = cache.ByObject{Transform: stripAPIRule}
}

// stripAPIRule keeps what the in-use check reads.
func stripAPIRule(obj any) (any, error) {
	r, ok := obj.(*porticov1alpha1.APIRule)
	if !ok {
		return obj, nil
	}
	return &porticov1alpha1.APIRule{TypeMeta: r.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: r.Name, Namespace: r.Namespace, UID: r.UID, ResourceVersion: r.ResourceVersion,
	}, Spec: porticov1alpha1.APIRuleSpec{Gateway: r.Spec.Gateway, ParentRef: r.Spec.ParentRef}}, nil
}

// SetupWithManager registers the controller: the APIGateway named default
// is its only key; changes to its Gateways, VirtualServices, Certificates
// and to which gateway APIRules use bring it back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := certificateExpiry.Serve(mgr); err != nil {
		return err
	}
	toDefault := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: operatorv1alpha1.SingletonName}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("gateway").
		// One key; the queue is Portico's fair queue, and its retries
		// Portico's, as every controller's.
		WithOptions(fairqueue.Options(controller.Options{})).
		For(&operatorv1alpha1.APIGateway{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == operatorv1alpha1.SingletonName
		}))).
		Watches(&networkingv1.Gateway{}, toDefault).
		Watches(&networkingv1.VirtualService{}, toDefault)
	if r.CertManager {
		b = b.Watches(&cmv1.Certificate{}, toDefault)
	}
	if r.GatewayAPI {
		// Its own Gateway's status (Programmed) and its redirect route.
		b = b.Watches(&gwapiv1.Gateway{}, toDefault).Watches(&gwapiv1.HTTPRoute{}, toDefault)
	}
	if r.APIRules {
		b = b.Watches(&porticov1alpha1.APIRule{}, toDefault, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				before, after := e.ObjectOld.(*porticov1alpha1.APIRule), e.ObjectNew.(*porticov1alpha1.APIRule)
				return before.Spec.Gateway != after.Spec.Gateway || !equality.Semantic.DeepEqual(before.Spec.ParentRef, after.Spec.ParentRef)
			},
		}))
	}
	return b.Complete(r)
}
