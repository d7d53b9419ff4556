package reconciler

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/backoff"
)

// RBAC of the operator: read APIGateways and write their status, read CRDs,
// manage Deployments, PodDisruptionBudgets and NetworkPolicies and read the
// Deployments' ReplicaSets and pods in its own namespace, write Events and
// Leases (leader election also records a core Event on its Lease), and read
// the EndpointSlices of namespace default (the API server's addresses, which
// the NetworkPolicies allow; the cache reads only Service kubernetes's),
// manage the rate-limit service's Service and read the Secrets of its own
// namespace (the Redis Secret of spec.rateLimits.global: whether it exists
// with an address; the cache keeps no value but the address). Nothing else.
//
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways/finalizers,verbs=update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,namespace=portico-system,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,namespace=portico-system,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=portico-system,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=default,resources=endpointslices,resourceNames=kubernetes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=portico-system,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=portico-system,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler. Every watched event maps to
// the one key "default", so the workqueue collapses bursts into a single
// reconcile.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toDefault := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{Request}
	})
	required := r.Catalog.CRDNames()
	requiredCRD := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return slices.Contains(required, o.GetName())
	})
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()["app.kubernetes.io/managed-by"] == operatorv1alpha1.ManagedBy
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("apigateway").
		For(&operatorv1alpha1.APIGateway{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == operatorv1alpha1.SingletonName
		}))).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, toDefault, builder.WithPredicates(requiredCRD)).
		Watches(&appsv1.Deployment{}, toDefault, builder.WithPredicates(managed)).
		Watches(&policyv1.PodDisruptionBudget{}, toDefault, builder.WithPredicates(managed)).
		Watches(&networkingv1.NetworkPolicy{}, toDefault, builder.WithPredicates(managed)).
		Watches(&discoveryv1.EndpointSlice{}, toDefault, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == APIServerNamespace && o.GetName() == APIServerService
		}))).
		Watches(&corev1.Service{}, toDefault, builder.WithPredicates(managed)).
		// Only the Redis Secret the spec names: its coming, going and keys
		// decide whether the rate-limit service runs.
		Watches(&corev1.Secret{}, toDefault, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace && o.GetName() == r.redisSecretName(context.Background())
		}))).
		Watches(&appsv1.ReplicaSet{}, toDefault, builder.WithPredicates(managed)).
		Watches(&corev1.Pod{}, toDefault, builder.WithPredicates(managed)).
		// Retries as every Portico controller's (package backoff): within
		// backoff.Max of the last, however long the API server was away,
		// where controller-runtime's default lets them wait up to 1000 s.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, RateLimiter: backoff.Limiter[reconcile.Request]()}).
		Complete(r)
}

// redisSecretName is the Secret spec.rateLimits.global.redis names, read
// from the cache; "" when none is named.
func (r *Reconciler) redisSecretName(ctx context.Context) string {
	gw := &operatorv1alpha1.APIGateway{}
	if err := r.Client.Get(ctx, Request.NamespacedName, gw); err != nil {
		return ""
	}
	if global := gw.Spec.GlobalRateLimits(); global != nil {
		return global.Redis.SecretName
	}
	return ""
}
