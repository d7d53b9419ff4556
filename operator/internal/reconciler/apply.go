package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// applyDeployment server-side applies the desired Deployment unless the
// fields the operator owns on the live object already equal it. It reports
// whether it wrote. Fields others own (labels, annotations, a restartedAt
// stamp) do not count, so they are left alone and cause no write; a field
// the operator owned that someone changed moved to their manager, differs,
// and is taken back with forced ownership.
func (r *Reconciler) applyDeployment(ctx context.Context, name operatorv1alpha1.ControllerName, desired *appsv1ac.DeploymentApplyConfiguration, live *appsv1.Deployment) (bool, error) {
	if live != nil {
		same, err := ownsDesired(live, desired)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	}
	r.Metrics.Writes.WithLabelValues("apply").Inc()
	if err := r.Client.Apply(ctx, desired, client.FieldOwner(operatorv1alpha1.FieldManager), client.ForceOwnership); err != nil {
		r.Metrics.Errors.WithLabelValues(string(name), "apply").Inc()
		return false, fmt.Errorf("apply deployment %s/%s: %w", *desired.Namespace, *desired.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Applied controller deployment", "controller", name, "deployment", *desired.Name, "created", live == nil)
	return true, nil
}

// ownsDesired reports whether the fields the operator owns on live are
// exactly the desired ones.
func ownsDesired(live *appsv1.Deployment, desired *appsv1ac.DeploymentApplyConfiguration) (bool, error) {
	owned, err := appsv1ac.ExtractDeployment(live, operatorv1alpha1.FieldManager)
	if err != nil {
		return false, fmt.Errorf("extract owned fields of deployment %s: %w", live.Name, err)
	}
	a, err := json.Marshal(owned)
	if err != nil {
		return false, err
	}
	b, err := json.Marshal(desired)
	if err != nil {
		return false, err
	}
	return bytes.Equal(a, b), nil
}

// deleteDeployment removes a managed Deployment, if there is one that is not
// already being deleted. The UID precondition guarantees that only the
// object the decision was made on is deleted.
func (r *Reconciler) deleteDeployment(ctx context.Context, name operatorv1alpha1.ControllerName, live *appsv1.Deployment) error {
	if live == nil || !live.DeletionTimestamp.IsZero() {
		return nil
	}
	r.Metrics.Writes.WithLabelValues("delete").Inc()
	err := r.Client.Delete(ctx, live, client.Preconditions{UID: &live.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.Metrics.Errors.WithLabelValues(string(name), "delete").Inc()
		return fmt.Errorf("delete deployment %s/%s: %w", live.Namespace, live.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted controller deployment", "controller", name, "deployment", live.Name)
	return nil
}
