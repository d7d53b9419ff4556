package reconciler

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// ManagedSelector selects the objects the operator manages.
var ManagedSelector = labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": operatorv1alpha1.ManagedBy})

// CacheOptions configures the manager's cache so memory stays flat however
// many CRDs the cluster has: CRDs keep only what gating reads (and nothing
// at all unless the catalog needs them), Deployments, their ReplicaSets and
// pods are cached only in the operator namespace with the managed-by label
// (ReplicaSets and pods inherit it from the pod template).
func CacheOptions(namespace string, requiredCRDs []string) cache.Options {
	managed := cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      ManagedSelector,
	}
	deployments := managed
	deployments.Transform = TransformDeployment
	pods := managed
	pods.Transform = TransformPod
	replicaSets := managed
	replicaSets.Transform = TransformReplicaSet
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: TransformCRD(requiredCRDs)},
			&appsv1.Deployment{}:                        deployments,
			&appsv1.ReplicaSet{}:                        replicaSets,
			&corev1.Pod{}:                               pods,
		},
	}
}

// TransformCRD returns a cache transform that reduces a CRD to its name,
// served versions, Established condition and deletion timestamp — the
// schemas, which dominate a CRD's size, are dropped. CRDs the catalog does
// not require keep only their identity.
func TransformCRD(required []string) toolscache.TransformFunc {
	return func(in any) (any, error) {
		crd, ok := in.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return in, nil
		}
		out := &apiextensionsv1.CustomResourceDefinition{
			TypeMeta: crd.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name:              crd.Name,
				UID:               crd.UID,
				ResourceVersion:   crd.ResourceVersion,
				Generation:        crd.Generation,
				DeletionTimestamp: crd.DeletionTimestamp,
			},
		}
		if !slices.Contains(required, crd.Name) {
			return out, nil
		}
		out.Spec.Group = crd.Spec.Group
		out.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: crd.Spec.Names.Plural, Kind: crd.Spec.Names.Kind}
		out.Spec.Scope = crd.Spec.Scope
		for _, v := range crd.Spec.Versions {
			out.Spec.Versions = append(out.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
				Name: v.Name, Served: v.Served, Storage: v.Storage,
			})
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established || c.Type == apiextensionsv1.Terminating {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
		return out, nil
	}
}

// TransformDeployment keeps only the operator's own managedFields entries:
// the reconciler compares what it owns through them (a nil transform would
// fall back to the default one, which strips them all).
func TransformDeployment(in any) (any, error) {
	d, ok := in.(*appsv1.Deployment)
	if !ok {
		return in, nil
	}
	owned := d.ManagedFields[:0:0]
	for _, f := range d.ManagedFields {
		if f.Manager == operatorv1alpha1.FieldManager {
			owned = append(owned, f)
		}
	}
	d.ManagedFields = owned
	return d, nil
}

// TransformReplicaSet keeps what readiness reads of a ReplicaSet: identity,
// labels, owners and pod template (ImageID finds the current template's
// ReplicaSet by comparing templates, as the deployment controller does).
func TransformReplicaSet(in any) (any, error) {
	rs, ok := in.(*appsv1.ReplicaSet)
	if !ok {
		return in, nil
	}
	return &appsv1.ReplicaSet{
		TypeMeta: rs.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              rs.Name,
			Namespace:         rs.Namespace,
			UID:               rs.UID,
			ResourceVersion:   rs.ResourceVersion,
			Labels:            rs.Labels,
			OwnerReferences:   rs.OwnerReferences,
			DeletionTimestamp: rs.DeletionTimestamp,
		},
		Spec: appsv1.ReplicaSetSpec{Template: rs.Spec.Template},
	}, nil
}

// TransformPod keeps what readiness reads of a pod: identity, labels,
// owners, deletion and container states (with the images they run).
func TransformPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			OwnerReferences:   pod.OwnerReferences,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			InitContainerStatuses: pod.Status.InitContainerStatuses,
			ContainerStatuses:     pod.Status.ContainerStatuses,
		},
	}, nil
}
