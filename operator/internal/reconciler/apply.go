package reconciler

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/owned"
)

// The kinds the operator applies, through the write path of package
// owned: typed apply configurations, compared on the fields the operator's
// field manager owns (owned.Writer.ApplyConfiguration).
var (
	deploymentKind       = owned.Applied("deployment", appsv1ac.ExtractDeployment)
	disruptionBudgetKind = owned.Applied("poddisruptionbudget", policyv1ac.ExtractPodDisruptionBudget)
	serviceKind          = owned.Applied("service", corev1ac.ExtractService)
	networkPolicyKind    = owned.Applied("networkpolicy", networkingv1ac.ExtractNetworkPolicy)
	applied              = owned.Table{deploymentKind, disruptionBudgetKind, serviceKind, networkPolicyKind}
)

// writer is the operator's write path: server-side applies as the
// operator's field manager; deletes with background propagation.
func (r *Reconciler) writer() *owned.Writer {
	r.writerOnce.Do(func() {
		r.objects = &owned.Writer{
			Client: r.Client, Reader: r.Client, Kinds: applied, FieldOwner: operatorv1alpha1.FieldManager,
			DeleteOptions: []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)},
		}
	})
	return r.objects
}

// inSnapshot proves an object the operator's: the snapshot holds only the
// objects it manages (budgets, policies and Services controlled by an
// APIGateway; its Deployments in its own namespace).
func inSnapshot(client.Object) bool { return true }

// object is o as a client.Object, nil for a nil pointer of T.
func object[T client.Object](o T) client.Object {
	if any(o) == any(*new(T)) {
		return nil
	}
	return o
}

// applyConfiguration is the part of a typed apply configuration the
// reconciler reads.
type applyConfiguration interface {
	GetName() *string
	GetNamespace() *string
}

// applyDeployment server-side applies the controller's Deployment; see applyObject.
func (r *Reconciler) applyDeployment(ctx context.Context, name operatorv1alpha1.ControllerName, desired *appsv1ac.DeploymentApplyConfiguration, live *appsv1.Deployment) (*appsv1.Deployment, error) {
	obj, err := applyObject(ctx, r, &deploymentKind, name, *desired.Namespace, *desired.Name, desired, object(live))
	if obj == nil {
		return nil, err
	}
	return obj.(*appsv1.Deployment), err
}

// reconcileManaged applies a controller's companion object (its
// PodDisruptionBudget, its NetworkPolicy), or deletes the live one when it
// must have none (desired nil). One being deleted is recreated once it is
// gone. An object of that name that carries the operator's labels but that
// no APIGateway controls is someone else's: it is neither taken over nor
// deleted, and the error says so.
func reconcileManaged[T client.Object, A applyConfiguration](ctx context.Context, r *Reconciler, kind *owned.Kind,
	controller operatorv1alpha1.ControllerName, desired A, live T, snap *snapshot) error {
	if any(desired) == any(*new(A)) {
		return deleteManaged(ctx, r, kind, controller, live)
	}
	if any(live) != any(*new(T)) && !live.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if snap.foreign[kind.Name+"/"+*desired.GetName()] {
		return fmt.Errorf("%s %s/%s exists and no APIGateway controls it: the operator does not take it over; delete it to let the operator create its own",
			kind.Name, *desired.GetNamespace(), *desired.GetName())
	}
	_, err := applyObject(ctx, r, kind, controller, *desired.GetNamespace(), *desired.GetName(), desired, object(live))
	return err
}

// applyObject server-side applies the desired object unless that would
// change nothing (owned.Writer.ApplyConfiguration) and returns the newest
// object it knows, counting the apply and its failure in the operator's
// metrics.
func applyObject(ctx context.Context, r *Reconciler, kind *owned.Kind, controller operatorv1alpha1.ControllerName,
	namespace, name string, desired any, live client.Object) (client.Object, error) {
	obj, sent, err := r.writer().ApplyConfiguration(ctx, kind, namespace, name, desired, live)
	if sent {
		r.Metrics.Writes.WithLabelValues("apply").Inc()
	}
	if err != nil {
		if sent {
			r.Metrics.Errors.WithLabelValues(string(controller), "apply").Inc()
		}
		return nil, err
	}
	if sent {
		ctrl.LoggerFrom(ctx).Info("Applied controller "+kind.Name, "controller", controller, kind.Name, name, "created", live == nil)
	}
	return obj, nil
}

// deleteManaged removes a managed object of the kind, if there is one;
// see deleteObject.
func deleteManaged[T client.Object](ctx context.Context, r *Reconciler, kind *owned.Kind, controller operatorv1alpha1.ControllerName, live T) error {
	if object(live) == nil {
		return nil
	}
	return r.deleteObject(ctx, kind.Name, controller, live)
}

// deleteObject removes a managed object, unless it is already being
// deleted. The UID precondition guarantees that only the object the
// decision was made on is deleted.
func (r *Reconciler) deleteObject(ctx context.Context, kind string, name operatorv1alpha1.ControllerName, live client.Object) error {
	if live.GetDeletionTimestamp() != nil {
		return nil
	}
	r.Metrics.Writes.WithLabelValues("delete").Inc()
	// The UID precondition deletes only the object the decision was made
	// on; one that replaced it meanwhile (a conflict) is the next
	// reconcile's.
	_, err := r.writer().Delete(ctx, inSnapshot, []client.Object{live}, nil)
	if err != nil && !apierrors.IsConflict(err) {
		r.Metrics.Errors.WithLabelValues(string(name), "delete").Inc()
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Deleted controller "+kind, "controller", name, kind, live.GetName())
	return nil
}
