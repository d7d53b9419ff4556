package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// appliedDeployment is what the reconciler remembers of its last apply of
// one Deployment.
type appliedDeployment struct {
	// sent is the apply configuration as sent.
	sent []byte
	// owned is the operator's fields in the server's response: what was sent,
	// completed by the server with its defaults.
	owned []byte
	// overRV is the resourceVersion of the live object it was applied over;
	// while the cache still shows that version, it has not seen the apply.
	overRV string
	// response is the Deployment the server returned, without managedFields.
	response *appsv1.Deployment
}

// applyDeployment server-side applies the desired Deployment unless that
// would change nothing, and returns the newest Deployment it knows: the
// server's response to this apply or to one the cache has not caught up
// with, else live.
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
func (r *Reconciler) applyDeployment(ctx context.Context, name operatorv1alpha1.ControllerName, desired *appsv1ac.DeploymentApplyConfiguration, live *appsv1.Deployment) (*appsv1.Deployment, error) {
	sent, err := json.Marshal(desired)
	if err != nil {
		return nil, fmt.Errorf("encode deployment %s: %w", *desired.Name, err)
	}
	if live != nil {
		owned, err := ownedFields(live)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(owned, sent) {
			return live, nil
		}
		if last, ok := r.applied[*desired.Name]; ok && bytes.Equal(last.sent, sent) {
			if live.ResourceVersion == last.overRV {
				return last.response, nil // the cache lags behind the apply
			}
			if bytes.Equal(owned, last.owned) {
				return live, nil
			}
		}
	}

	r.Metrics.Writes.WithLabelValues("apply").Inc()
	applied := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: *desired.Namespace, Name: *desired.Name}}
	err = r.Client.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, sent),
		client.FieldOwner(operatorv1alpha1.FieldManager), client.ForceOwnership)
	if err != nil {
		r.Metrics.Errors.WithLabelValues(string(name), "apply").Inc()
		return nil, fmt.Errorf("apply deployment %s/%s: %w", *desired.Namespace, *desired.Name, err)
	}
	owned, err := ownedFields(applied)
	if err != nil {
		return nil, err
	}
	applied.ManagedFields = nil
	last := appliedDeployment{sent: sent, owned: owned, response: applied}
	if live != nil {
		last.overRV = live.ResourceVersion
	}
	if r.applied == nil {
		r.applied = map[string]appliedDeployment{}
	}
	r.applied[*desired.Name] = last
	ctrl.LoggerFrom(ctx).Info("Applied controller deployment", "controller", name, "deployment", *desired.Name, "created", live == nil)
	return applied, nil
}

// ownedFields returns, as JSON, the fields the operator owns on d.
func ownedFields(d *appsv1.Deployment) ([]byte, error) {
	owned, err := appsv1ac.ExtractDeployment(d, operatorv1alpha1.FieldManager)
	if err != nil {
		return nil, fmt.Errorf("extract owned fields of deployment %s: %w", d.Name, err)
	}
	return json.Marshal(owned)
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
