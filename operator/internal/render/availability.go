package render

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// HostnameTopologyKey spreads pods across nodes.
const HostnameTopologyKey = "kubernetes.io/hostname"

// WantsDisruptionBudget reports whether a controller running the spec gets
// a PodDisruptionBudget: only with more than one replica, since a budget
// over a single pod would block every drain of its node.
func WantsDisruptionBudget(spec operatorv1alpha1.ControllerSpec) bool {
	return Replicas(spec) > 1
}

// DisruptionBudget renders the controller's PodDisruptionBudget, named
// like its Deployment and selecting exactly its pods, or nil when the
// controller must have none. maxUnavailable 1 unless the spec says
// otherwise. Pods that are not ready may always be evicted: a crash-looping
// controller must not hold a node drain.
func DisruptionBudget(in Input) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	if !WantsDisruptionBudget(in.Spec) {
		return nil
	}
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(in.Entry.Name))).
		WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow)
	switch budget := in.Spec.PodDisruptionBudget; {
	case budget != nil && budget.MinAvailable != nil:
		spec.WithMinAvailable(*budget.MinAvailable)
	case budget != nil && budget.MaxUnavailable != nil:
		spec.WithMaxUnavailable(*budget.MaxUnavailable)
	default:
		spec.WithMaxUnavailable(intstr.FromInt32(1))
	}
	return policyv1ac.PodDisruptionBudget(in.Entry.Binary(), in.Namespace).
		WithLabels(Labels(in.Entry.Name)).
		WithOwnerReferences(ownerReference(in.Owner)).
		WithSpec(spec)
}

// topologySpread is the spec's constraints, each without a labelSelector
// given the controller's pods; or, when the spec sets none and the
// controller runs more than one replica, one spreading them across nodes
// as far as the scheduler can.
func topologySpread(in Input) []*corev1ac.TopologySpreadConstraintApplyConfiguration {
	selector := metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(in.Entry.Name))
	if in.Spec.TopologySpreadConstraints == nil {
		if Replicas(in.Spec) <= 1 {
			return nil
		}
		return []*corev1ac.TopologySpreadConstraintApplyConfiguration{corev1ac.TopologySpreadConstraint().
			WithMaxSkew(1).
			WithTopologyKey(HostnameTopologyKey).
			WithWhenUnsatisfiable(corev1.ScheduleAnyway).
			WithLabelSelector(selector)}
	}
	out := make([]*corev1ac.TopologySpreadConstraintApplyConfiguration, 0, len(in.Spec.TopologySpreadConstraints))
	for i := range in.Spec.TopologySpreadConstraints {
		c := topologySpreadConstraint(in.Spec.TopologySpreadConstraints[i])
		if c.LabelSelector == nil {
			c.WithLabelSelector(selector)
		}
		out = append(out, c)
	}
	return out
}

// imagePullSecrets names the spec's pull secrets in the pod.
func imagePullSecrets(spec operatorv1alpha1.ControllerSpec) []*corev1ac.LocalObjectReferenceApplyConfiguration {
	out := make([]*corev1ac.LocalObjectReferenceApplyConfiguration, 0, len(spec.ImagePullSecrets))
	for _, s := range spec.ImagePullSecrets {
		out = append(out, corev1ac.LocalObjectReference().WithName(s.Name))
	}
	return out
}
