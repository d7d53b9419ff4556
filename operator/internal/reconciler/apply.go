package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// appliedObject is what the reconciler remembers of its last apply of one
// object.
type appliedObject struct {
	// sent is the apply configuration as sent.
	sent []byte
	// owned is the operator's fields in the server's response: what was sent,
	// completed by the server with its defaults.
	owned []byte
	// overRV is the resourceVersion of the live object it was applied over;
	// while the cache still shows that version, it has not seen the apply.
	overRV string
	// response is the object the server returned, without managedFields.
	response client.Object
}

// managedKind is one kind of object the operator applies: how to name it
// in logs and errors, make an empty one, and extract the fields the
// operator owns on it.
type managedKind[T client.Object] struct {
	name    string
	newObj  func() T
	extract func(T) (any, error)
}

var (
	deploymentKind = managedKind[*appsv1.Deployment]{
		name:   "deployment",
		newObj: func() *appsv1.Deployment { return &appsv1.Deployment{} },
		extract: func(d *appsv1.Deployment) (any, error) {
			return appsv1ac.ExtractDeployment(d, operatorv1alpha1.FieldManager)
		},
	}
	disruptionBudgetKind = managedKind[*policyv1.PodDisruptionBudget]{
		name:   "poddisruptionbudget",
		newObj: func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
		extract: func(b *policyv1.PodDisruptionBudget) (any, error) {
			return policyv1ac.ExtractPodDisruptionBudget(b, operatorv1alpha1.FieldManager)
		},
	}
	serviceKind = managedKind[*corev1.Service]{
		name:   "service",
		newObj: func() *corev1.Service { return &corev1.Service{} },
		extract: func(s *corev1.Service) (any, error) {
			return corev1ac.ExtractService(s, operatorv1alpha1.FieldManager)
		},
	}
	networkPolicyKind = managedKind[*networkingv1.NetworkPolicy]{
		name:   "networkpolicy",
		newObj: func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} },
		extract: func(p *networkingv1.NetworkPolicy) (any, error) {
			return networkingv1ac.ExtractNetworkPolicy(p, operatorv1alpha1.FieldManager)
		},
	}
)

// applyConfiguration is the part of a typed apply configuration the
// reconciler reads.
type applyConfiguration interface {
	GetName() *string
	GetNamespace() *string
}

// applyDeployment server-side applies the controller's Deployment; see applyObject.
func (r *Reconciler) applyDeployment(ctx context.Context, name operatorv1alpha1.ControllerName, desired *appsv1ac.DeploymentApplyConfiguration, live *appsv1.Deployment) (*appsv1.Deployment, error) {
	return applyObject(ctx, r, deploymentKind, name, *desired.Namespace, *desired.Name, desired, live)
}

// reconcileManaged applies a controller's companion object (its
// PodDisruptionBudget, its NetworkPolicy), or deletes the live one when it
// must have none (desired nil). One being deleted is recreated once it is
// gone. An object of that name that carries the operator's labels but that
// no APIGateway controls is someone else's: it is neither taken over nor
// deleted, and the error says so.
func reconcileManaged[T client.Object, A applyConfiguration](ctx context.Context, r *Reconciler, kind managedKind[T],
	controller operatorv1alpha1.ControllerName, desired A, live T, snap *snapshot) error {
	if any(desired) == any(*new(A)) {
		return deleteManaged(ctx, r, kind, controller, live)
	}
	if any(live) != any(*new(T)) && !live.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if snap.foreign[kind.name+"/"+*desired.GetName()] {
		return fmt.Errorf("%s %s/%s exists and no APIGateway controls it: the operator does not take it over; delete it to let the operator create its own",
			kind.name, *desired.GetNamespace(), *desired.GetName())
	}
	_, err := applyObject(ctx, r, kind, controller, *desired.GetNamespace(), *desired.GetName(), desired, live)
	return err
}

// applyObject server-side applies the desired object unless that would
// change nothing, and returns the newest object it knows: the server's
// response to this apply or to one the cache has not caught up with, else
// live (nil when there is none).
//
// "Would change nothing" is judged on the fields the operator owns on the
// live object (its managedFields entry). Fields others own (labels,
// annotations, a restartedAt stamp) do not count, so they are left alone
// and cause no write; a field the operator owned that someone changed moved
// to their manager, differs, and is taken back with forced ownership.
//
// The server fills defaults into fields the operator sets (a fieldRef's
// apiVersion), so the owned fields can differ from the rendered ones for
// ever. What counts is therefore also what the server returned when this
// same desired state was last applied: the live object is current when its
// owned fields equal either the rendering or that response.
func applyObject[T client.Object](ctx context.Context, r *Reconciler, kind managedKind[T], controller operatorv1alpha1.ControllerName,
	namespace, name string, desired any, live T) (T, error) {
	var zero T
	exists := any(live) != any(zero) // a nil pointer of T: no live object
	key := kind.name + "/" + name
	sent, err := json.Marshal(desired)
	if err != nil {
		return zero, fmt.Errorf("encode %s %s: %w", kind.name, name, err)
	}
	if exists {
		owned, err := ownedFields(kind, live)
		if err != nil {
			return zero, err
		}
		if bytes.Equal(owned, sent) {
			return live, nil
		}
		if last, ok := r.applied[key]; ok && bytes.Equal(last.sent, sent) {
			if live.GetResourceVersion() == last.overRV {
				return last.response.(T), nil // the cache lags behind the apply
			}
			if bytes.Equal(owned, last.owned) {
				return live, nil
			}
		}
	}

	r.Metrics.Writes.WithLabelValues("apply").Inc()
	applied := kind.newObj()
	applied.SetNamespace(namespace)
	applied.SetName(name)
	err = r.Client.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, sent),
		client.FieldOwner(operatorv1alpha1.FieldManager), client.ForceOwnership)
	if err != nil {
		r.Metrics.Errors.WithLabelValues(string(controller), "apply").Inc()
		return zero, fmt.Errorf("apply %s %s/%s: %w", kind.name, namespace, name, err)
	}
	owned, err := ownedFields(kind, applied)
	if err != nil {
		return zero, err
	}
	applied.SetManagedFields(nil)
	last := appliedObject{sent: sent, owned: owned, response: applied}
	if exists {
		last.overRV = live.GetResourceVersion()
	}
	if r.applied == nil {
		r.applied = map[string]appliedObject{}
	}
	r.applied[key] = last
	ctrl.LoggerFrom(ctx).Info("Applied controller "+kind.name, "controller", controller, kind.name, name, "created", !exists)
	return applied, nil
}

// ownedFields returns, as JSON, the fields the operator owns on o.
func ownedFields[T client.Object](kind managedKind[T], o T) ([]byte, error) {
	owned, err := kind.extract(o)
	if err != nil {
		return nil, fmt.Errorf("extract owned fields of %s %s: %w", kind.name, o.GetName(), err)
	}
	return json.Marshal(owned)
}

// deleteManaged removes a managed object of the kind, if there is one;
// see deleteObject.
func deleteManaged[T client.Object](ctx context.Context, r *Reconciler, kind managedKind[T], controller operatorv1alpha1.ControllerName, live T) error {
	if any(live) == any(*new(T)) {
		return nil
	}
	return r.deleteObject(ctx, kind.name, controller, live)
}

// deleteObject removes a managed object, unless it is already being
// deleted. The UID precondition guarantees that only the object the
// decision was made on is deleted.
func (r *Reconciler) deleteObject(ctx context.Context, kind string, name operatorv1alpha1.ControllerName, live client.Object) error {
	if live.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := live.GetUID()
	r.Metrics.Writes.WithLabelValues("delete").Inc()
	err := r.Client.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.Metrics.Errors.WithLabelValues(string(name), "delete").Inc()
		return fmt.Errorf("delete %s %s/%s: %w", kind, live.GetNamespace(), live.GetName(), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted controller "+kind, "controller", name, kind, live.GetName())
	return nil
}
