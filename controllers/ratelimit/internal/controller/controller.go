package controller

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	controllerruntime "github.com/portico-dev/portico/controllers/runtime"
)

// FieldManager is the ratelimit controller's server-side apply identity.
const FieldManager = "ratelimit-controller"

// +kubebuilder:rbac:groups=gateway.portico.dev,resources=ratelimits,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=ratelimits/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.istio.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.istio.io,resources=envoyfilters,verbs=get;list;watch;create;update;patch;delete

// World is the single key every event maps to.
var World = reconcile.Request{NamespacedName: types.NamespacedName{Name: "world"}}

// ManagedSelector selects the EnvoyFilters this controller owns.
var ManagedSelector = client.MatchingLabels{topology.LabelManagedBy: topology.ManagedBy}

// Reconciler computes and applies every EnvoyFilter at once.
type Reconciler struct {
	Client client.Client
	// GatewaysKnown and APIRulesKnown are true while those CRDs are installed
	// (and so watched).
	GatewaysKnown bool
	APIRulesKnown bool
}

// Reconcile converges the world.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	in, limits, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	out := topology.Compute(in)

	var existing networkingv1alpha3.EnvoyFilterList
	if err := r.Client.List(ctx, &existing, ManagedSelector, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("list EnvoyFilters: %w", err)
	}
	live := map[string]*networkingv1alpha3.EnvoyFilter{}
	for _, ef := range existing.Items {
		live[ef.Namespace+"/"+ef.Name] = ef
	}

	var errs []error
	failed := map[string]error{}
	wanted := map[string]bool{}
	for _, ef := range out.EnvoyFilters {
		key := ef.Namespace + "/" + ef.Name
		wanted[key] = true
		if err := r.apply(ctx, ef, live[key]); err != nil {
			failed[key] = err
			errs = append(errs, err)
		}
	}
	for key, ef := range live {
		if wanted[key] || !ef.DeletionTimestamp.IsZero() {
			continue
		}
		uid := ef.UID
		if err := r.Client.Delete(ctx, ef, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete EnvoyFilter %s: %w", key, err))
		} else {
			ctrl.LoggerFrom(ctx).Info("Deleted EnvoyFilter no policy needs", "envoyfilter", key)
		}
	}

	for i := range limits {
		errs = append(errs, r.writeStatus(ctx, &limits[i], out.Verdicts, failed))
	}
	return reconcile.Result{}, errors.Join(errs...)
}

func (r *Reconciler) read(ctx context.Context) (topology.Input, []gatewayv1alpha1.RateLimit, error) {
	in := topology.Input{GatewaysKnown: r.GatewaysKnown, APIRulesKnown: r.APIRulesKnown}
	// The world is only read here (statuses are patched from copies), so the
	// lists share the cache's objects instead of deep-copying thousands.
	var limits gatewayv1alpha1.RateLimitList
	if err := r.Client.List(ctx, &limits, client.UnsafeDisableDeepCopy); err != nil {
		return in, nil, fmt.Errorf("list RateLimits: %w", err)
	}
	for _, l := range limits.Items {
		if !l.DeletionTimestamp.IsZero() {
			continue
		}
		in.Policies = append(in.Policies, topology.Policy{Namespace: l.Namespace, Name: l.Name, Created: l.CreationTimestamp.Time, Spec: l.Spec})
	}
	if r.GatewaysKnown {
		var gateways networkingv1.GatewayList
		if err := r.Client.List(ctx, &gateways, client.UnsafeDisableDeepCopy); err != nil {
			return in, nil, fmt.Errorf("list Gateways: %w", err)
		}
		for _, g := range gateways.Items {
			in.Gateways = append(in.Gateways, topology.Gateway{Namespace: g.Namespace, Name: g.Name, Selector: g.Spec.Selector})
		}
	}
	if r.APIRulesKnown {
		var rules gatewayv1alpha1.APIRuleList
		if err := r.Client.List(ctx, &rules, client.UnsafeDisableDeepCopy); err != nil {
			return in, nil, fmt.Errorf("list APIRules: %w", err)
		}
		for _, a := range rules.Items {
			in.APIRules = append(in.APIRules, topology.APIRule{Namespace: a.Namespace, Name: a.Name, Gateway: a.Spec.Gateway, Rules: a.Spec.Rules})
		}
	}
	return in, limits.Items, nil
}

// apply writes an EnvoyFilter unless the live one already matches.
func (r *Reconciler) apply(ctx context.Context, desired, live *networkingv1alpha3.EnvoyFilter) error {
	if live != nil && proto.Equal(&desired.Spec, &live.Spec) && equality.Semantic.DeepEqual(desired.Labels, live.Labels) {
		return nil
	}
	if err := controllerruntime.Apply(ctx, r.Client, desired, FieldManager); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applied EnvoyFilter", "envoyfilter", desired.Namespace+"/"+desired.Name)
	return nil
}

func (r *Reconciler) writeStatus(ctx context.Context, limit *gatewayv1alpha1.RateLimit, verdicts map[types.NamespacedName]topology.Verdict, failed map[string]error) error {
	v, ok := verdicts[types.NamespacedName{Namespace: limit.Namespace, Name: limit.Name}]
	if !ok {
		return nil // being deleted
	}
	status := metav1.ConditionFalse
	reason, msg := v.Reason, v.Message
	if v.Enforced() {
		status = metav1.ConditionTrue
		if err := failed[v.EnvoyFilter]; err != nil {
			status, reason, msg = metav1.ConditionFalse, gatewayv1alpha1.ReasonEnvoyFilterFailed, err.Error()
		}
	}
	updated := limit.DeepCopy()
	updated.Status.ObservedGeneration = limit.Generation
	updated.Status.EnvoyFilter = v.EnvoyFilter
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{
		Type: gatewayv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: limit.Generation,
	})
	if equality.Semantic.DeepEqual(limit.Status, updated.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(limit)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write status of RateLimit %s/%s: %w", limit.Namespace, limit.Name, err)
	}
	return nil
}

// SetupWithManager maps every watched event to the World key.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toWorld := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{World}
	})
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[topology.LabelManagedBy] == topology.ManagedBy
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ratelimit").
		Watches(&gatewayv1alpha1.RateLimit{}, toWorld).
		Watches(&networkingv1alpha3.EnvoyFilter{}, toWorld, builder.WithPredicates(managed))
	if r.GatewaysKnown {
		b = b.Watches(&networkingv1.Gateway{}, toWorld)
	}
	if r.APIRulesKnown {
		b = b.Watches(&gatewayv1alpha1.APIRule{}, toWorld)
	}
	return b.Complete(r)
}
