package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/translate"
	controllerruntime "github.com/portico-dev/portico/controllers/runtime"
)

// FieldManager is the apirule controller's server-side apply identity.
const FieldManager = "apirule-controller"

// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=security.istio.io,resources=authorizationpolicies;requestauthentications,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.istio.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch

// Reconciler reconciles APIRules.
type Reconciler struct {
	Client client.Client
	// CheckGateways verifies that the referenced Istio Gateway exists; only
	// possible while Istio's Gateway CRD is installed.
	CheckGateways bool
}

// Reconcile converges one APIRule's Istio objects.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	rule := &gatewayv1alpha1.APIRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rule); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rule.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // owner references remove the Istio objects
	}
	log := ctrl.LoggerFrom(ctx).WithValues("apirule", klog.KObj(rule))
	ctx = ctrl.LoggerInto(ctx, log)

	before := rule.DeepCopy()
	defer func() {
		retErr = errors.Join(retErr, r.writeStatus(ctx, before, rule))
	}()

	selector, reason, msg := r.checkReferences(ctx, rule)
	if reason != "" {
		setReady(rule, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, nil
	}
	out, err := translate.Translate(translate.Input{APIRule: rule, Selector: selector})
	if err != nil {
		setReady(rule, metav1.ConditionFalse, gatewayv1alpha1.ReasonInvalidRule, err.Error()+"; the Istio objects were left unchanged")
		return ctrl.Result{}, nil
	}
	if err := r.applyAll(ctx, rule, out); err != nil {
		setReady(rule, metav1.ConditionFalse, gatewayv1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	msg = "VirtualService and AuthorizationPolicy applied"
	if out.RequestAuthentication != nil {
		msg = "VirtualService, AuthorizationPolicy and RequestAuthentication applied"
	}
	setReady(rule, metav1.ConditionTrue, gatewayv1alpha1.ReasonApplied, msg)
	return ctrl.Result{}, nil
}

// checkReferences returns the default Service's pod selector, or the reason
// and message of a missing reference.
func (r *Reconciler) checkReferences(ctx context.Context, rule *gatewayv1alpha1.APIRule) (map[string]string, string, string) {
	var selector map[string]string
	def := translate.DefaultService(rule)
	for _, ref := range translate.Services(rule) {
		svc := &corev1.Service{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, svc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, gatewayv1alpha1.ReasonServiceNotFound,
					fmt.Sprintf("service %s/%s not found; the Istio objects were left unchanged", ref.Namespace, ref.Name)
			}
			return nil, gatewayv1alpha1.ReasonApplyFailed, fmt.Sprintf("read service %s/%s: %v", ref.Namespace, ref.Name, err)
		}
		if ref.Name == def.Name && ref.Namespace == def.Namespace {
			selector = maps.Clone(svc.Spec.Selector)
		}
	}
	if r.CheckGateways {
		ns, name := splitGateway(rule.Spec.Gateway)
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Gateway"))
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); apierrors.IsNotFound(err) {
			return nil, gatewayv1alpha1.ReasonGatewayNotFound,
				fmt.Sprintf("Istio gateway %s not found; the Istio objects were left unchanged", rule.Spec.Gateway)
		}
	}
	return selector, "", ""
}

func splitGateway(ref string) (string, string) {
	for i := range ref {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:]
		}
	}
	return "", ref
}

func (r *Reconciler) applyAll(ctx context.Context, rule *gatewayv1alpha1.APIRule, out translate.Output) error {
	key := client.ObjectKeyFromObject(rule)
	errs := []error{
		r.applyIfChanged(ctx, out.VirtualService, &networkingv1.VirtualService{}, key),
		r.applyIfChanged(ctx, out.AuthorizationPolicy, &securityv1.AuthorizationPolicy{}, key),
	}
	if out.RequestAuthentication != nil {
		errs = append(errs, r.applyIfChanged(ctx, out.RequestAuthentication, &securityv1.RequestAuthentication{}, key))
	} else {
		errs = append(errs, r.deleteOwned(ctx, rule, &securityv1.RequestAuthentication{}, key))
	}
	return errors.Join(errs...)
}

// applyIfChanged reads the live object from the cache and applies desired
// unless the live spec, labels and owner already match.
func (r *Reconciler) applyIfChanged(ctx context.Context, desired, live client.Object, key client.ObjectKey) error {
	err := r.Client.Get(ctx, key, live)
	if err == nil && upToDate(desired, live) {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read %T %s: %w", live, key, err)
	}
	if err := controllerruntime.Apply(ctx, r.Client, desired, FieldManager); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applied", "kind", fmt.Sprintf("%T", desired), "name", key.Name)
	return nil
}

// deleteOwned deletes an object of the APIRule's that is no longer needed.
func (r *Reconciler) deleteOwned(ctx context.Context, rule *gatewayv1alpha1.APIRule, obj client.Object, key client.ObjectKey) error {
	if err := r.Client.Get(ctx, key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, rule) {
		return nil // not ours: never touch users' objects
	}
	uid := obj.GetUID()
	if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %T %s: %w", obj, key, err)
	}
	return nil
}

func specOf(obj client.Object) proto.Message {
	switch o := obj.(type) {
	case *networkingv1.VirtualService:
		return &o.Spec
	case *securityv1.AuthorizationPolicy:
		return &o.Spec
	case *securityv1.RequestAuthentication:
		return &o.Spec
	}
	return nil
}

func upToDate(desired, live client.Object) bool {
	for k, v := range desired.GetLabels() {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(desired.GetOwnerReferences(), live.GetOwnerReferences()) &&
		proto.Equal(specOf(desired), specOf(live))
}

func setReady(rule *gatewayv1alpha1.APIRule, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&rule.Status.Conditions, metav1.Condition{
		Type: gatewayv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: rule.Generation,
	})
	rule.Status.ObservedGeneration = rule.Generation
}

func (r *Reconciler) writeStatus(ctx context.Context, before, after *gatewayv1alpha1.APIRule) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, after, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write APIRule status: %w", err)
	}
	return nil
}
