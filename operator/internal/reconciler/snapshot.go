package reconciler

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/gating"
)

// snapshot is one consistent-enough read of the caches: everything a
// reconcile decides from.
type snapshot struct {
	crds        map[string]gating.CRDState
	deployments map[string]*appsv1.Deployment // by name
	replicaSets map[operatorv1alpha1.ControllerName][]appsv1.ReplicaSet
	pods        map[operatorv1alpha1.ControllerName][]corev1.Pod
}

func (r *Reconciler) readSnapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{
		crds:        map[string]gating.CRDState{},
		deployments: map[string]*appsv1.Deployment{},
		replicaSets: map[operatorv1alpha1.ControllerName][]appsv1.ReplicaSet{},
		pods:        map[operatorv1alpha1.ControllerName][]corev1.Pod{},
	}
	for _, name := range r.Catalog.CRDNames() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read CRD %s from cache: %w", name, err)
		}
		s.crds[name] = contract.StateOf(crd)
	}

	var deployments appsv1.DeploymentList
	if err := r.Client.List(ctx, &deployments, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: ManagedSelector}); err != nil {
		return nil, fmt.Errorf("list managed deployments from cache: %w", err)
	}
	for i := range deployments.Items {
		s.deployments[deployments.Items[i].Name] = &deployments.Items[i]
	}

	var replicaSets appsv1.ReplicaSetList
	if err := r.Client.List(ctx, &replicaSets, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: ManagedSelector}); err != nil {
		return nil, fmt.Errorf("list managed replicasets from cache: %w", err)
	}
	for _, rs := range replicaSets.Items {
		name := operatorv1alpha1.ControllerName(rs.Labels[operatorv1alpha1.LabelController])
		s.replicaSets[name] = append(s.replicaSets[name], rs)
	}

	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: ManagedSelector}); err != nil {
		return nil, fmt.Errorf("list managed pods from cache: %w", err)
	}
	for _, p := range pods.Items {
		name := operatorv1alpha1.ControllerName(p.Labels[operatorv1alpha1.LabelController])
		s.pods[name] = append(s.pods[name], p)
	}
	return s, nil
}
