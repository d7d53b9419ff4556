package reconciler

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/backoff"
	"github.com/portico-dev/portico/internal/contract"
)

// The Service whose endpoints are the API server's: default/kubernetes. The
// API server names its EndpointSlice like the Service.
const (
	APIServerNamespace = "default"
	APIServerService   = "kubernetes"
)

// HelmReleaseSecretType is the type of the Secrets Helm records releases
// in; the operator never needs them.
const HelmReleaseSecretType = "helm.sh/release.v1"

// ManagedSelector selects the objects the operator manages.
var ManagedSelector = labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": operatorv1alpha1.ManagedBy})

// CacheOptions configures the manager's cache so memory stays flat however
// many CRDs the cluster has: CRDs keep only what gating reads (and nothing
// at all unless the catalog needs them), Deployments, PodDisruptionBudgets,
// NetworkPolicies, Services, the Deployments' ReplicaSets and pods are cached only in
// the operator namespace with the managed-by label (ReplicaSets and pods
// inherit it from the pod template), EndpointSlices only the API
// server's one, and Secrets only the operator namespace's, without their
// values (TransformSecret). Informers reconnect as package backoff says.
func CacheOptions(namespace string, requiredCRDs []string) cache.Options {
	managed := cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      ManagedSelector,
	}
	deployments := managed
	deployments.Transform = KeepOwnManagedFields
	pods := managed
	pods.Transform = TransformPod
	budgets := managed
	budgets.Transform = KeepOwnManagedFields
	policies := managed
	policies.Transform = KeepOwnManagedFields
	replicaSets := managed
	replicaSets.Transform = TransformReplicaSet
	services := managed
	services.Transform = KeepOwnManagedFields
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		// Informers watch again within a second of the API server's return,
		// whatever the outage (package backoff).
		NewInformer: backoff.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: contract.TransformCRD(requiredCRDs)},
			&appsv1.Deployment{}:                        deployments,
			&policyv1.PodDisruptionBudget{}:             budgets,
			&networkingv1.NetworkPolicy{}:               policies,
			// Only Service default/kubernetes's slice: the API server's
			// addresses. Nobody but the cluster's administrators (and the
			// API server itself) can write there.
			&discoveryv1.EndpointSlice{}: {
				Namespaces: map[string]cache.Config{APIServerNamespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", APIServerService),
			},
			&appsv1.ReplicaSet{}: replicaSets,
			&corev1.Pod{}:        pods,
			&corev1.Service{}:    services,
			// Secrets of the operator's namespace only, but Helm's release
			// records (the largest and most numerous there), and of each only
			// its keys and the Redis address (TransformSecret): the cache
			// holds no credential.
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{namespace: {}},
				Field:      fields.OneTermNotEqualSelector("type", HelmReleaseSecretType),
				Transform:  TransformSecret,
			},
		},
	}
}

// TransformSecret keeps what gating reads of a Secret: its identity, its
// data keys without their values, and the value of key address (the Redis
// Secret's host:port, whose port the rate-limit service's NetworkPolicy
// allows). Passwords, keys and certificates never reach the cache.
func TransformSecret(in any) (any, error) {
	secret, ok := in.(*corev1.Secret)
	if !ok {
		return in, nil
	}
	data := make(map[string][]byte, len(secret.Data)+len(secret.StringData))
	for k := range secret.Data {
		data[k] = nil
	}
	if address, ok := secret.Data[contract.RedisAddressKey]; ok {
		data[contract.RedisAddressKey] = address
	}
	return &corev1.Secret{
		TypeMeta: secret.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              secret.Name,
			Namespace:         secret.Namespace,
			UID:               secret.UID,
			ResourceVersion:   secret.ResourceVersion,
			DeletionTimestamp: secret.DeletionTimestamp,
		},
		Data: data,
	}, nil
}

// KeepOwnManagedFields keeps only the operator's own managedFields entries
// of an object it applies (a Deployment, a PodDisruptionBudget): the
// reconciler compares what it owns through them (a nil transform would
// fall back to the default one, which strips them all).
func KeepOwnManagedFields(in any) (any, error) {
	o, ok := in.(metav1.Object)
	if !ok {
		return in, nil
	}
	fields := o.GetManagedFields()
	owned := fields[:0:0]
	for _, f := range fields {
		if f.Manager == operatorv1alpha1.FieldManager {
			owned = append(owned, f)
		}
	}
	o.SetManagedFields(owned)
	return o, nil
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
		TypeMeta:   rs.TypeMeta,
		ObjectMeta: readinessMeta(&rs.ObjectMeta),
		Spec:       appsv1.ReplicaSetSpec{Template: rs.Spec.Template},
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
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: readinessMeta(&pod.ObjectMeta),
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			InitContainerStatuses: pod.Status.InitContainerStatuses,
			ContainerStatuses:     pod.Status.ContainerStatuses,
		},
	}, nil
}

// readinessMeta keeps what readiness reads of an object's metadata:
// identity, labels, owners and deletion.
func readinessMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Labels:            m.Labels,
		OwnerReferences:   m.OwnerReferences,
		DeletionTimestamp: m.DeletionTimestamp,
	}
}
