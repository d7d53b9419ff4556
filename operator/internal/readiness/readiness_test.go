package readiness

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

type deploymentOption func(*appsv1.Deployment)

func newDeployment(opts ...deploymentOption) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "apirule-controller", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

func withReplicas(n int32) deploymentOption {
	return func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(n) }
}
func withStatus(observed int64, replicas, updated, ready, available int32) deploymentOption {
	return func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}
	}
}
func withProgressing(reason string) deploymentOption {
	return func(d *appsv1.Deployment) {
		d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: reason,
			Message: `ReplicaSet "apirule-controller-5d8" has timed out progressing.`,
		})
	}
}

func waitingPod(name, container, reason string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: container, Image: "reg/apirule-controller:v1", RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "back-off 40s"}},
		}}},
	}
}

func TestEvaluate(t *testing.T) {
	tests := map[string]struct {
		deployment *appsv1.Deployment
		pods       []corev1.Pod
		phase      operatorv1alpha1.ControllerPhase
		reason     string
		message    string
	}{
		"rollout complete": {
			deployment: newDeployment(),
			phase:      operatorv1alpha1.PhaseReady, reason: operatorv1alpha1.ReasonRolloutComplete,
			message: "deployment apirule-controller has 2 of 2 replicas ready",
		},
		"spec change not observed yet": {
			deployment: newDeployment(withStatus(1, 2, 2, 2, 2)),
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller spec update to be observed",
		},
		"new replicas not all updated": {
			deployment: newDeployment(withStatus(2, 2, 1, 2, 2)),
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller rollout to finish: 1 of 2 new replicas have been updated",
		},
		"old replicas pending termination": {
			deployment: newDeployment(withStatus(2, 3, 2, 3, 3)),
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller rollout to finish: 1 old replicas are pending termination",
		},
		"updated replicas not available": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller rollout to finish: 1 of 2 updated replicas are available",
		},
		"scaled to zero": {
			deployment: newDeployment(withReplicas(0), withStatus(2, 0, 0, 0, 0)),
			phase:      operatorv1alpha1.PhaseReady, reason: operatorv1alpha1.ReasonScaledToZero,
			message: "deployment apirule-controller is scaled to zero replicas",
		},
		"progress deadline exceeded": {
			deployment: newDeployment(withStatus(2, 2, 1, 1, 1), withProgressing("ProgressDeadlineExceeded")),
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonProgressDeadlineExceeded,
			message: `deployment apirule-controller exceeded its progress deadline: ReplicaSet "apirule-controller-5d8" has timed out progressing.`,
		},
		"stale deadline condition is ignored until observed": {
			deployment: newDeployment(withStatus(1, 2, 2, 2, 2), withProgressing("ProgressDeadlineExceeded")),
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller spec update to be observed",
		},
		"crash looping pod named, even mid-rollout": {
			deployment: newDeployment(withStatus(2, 2, 1, 1, 1)),
			pods:       []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "apirule-controller-a"}}, waitingPod("apirule-controller-b", "manager", "CrashLoopBackOff")},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonCrashLoopBackOff,
			message: "pod apirule-controller-b container manager is in CrashLoopBackOff (4 restarts): back-off 40s",
		},
		"image pull back-off": {
			deployment: newDeployment(),
			pods:       []corev1.Pod{waitingPod("apirule-controller-x", "manager", "ImagePullBackOff")},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonImagePullFailed,
			message: "pod apirule-controller-x container manager cannot pull image reg/apirule-controller:v1: ImagePullBackOff: back-off 40s",
		},
		"err image pull": {
			deployment: newDeployment(),
			pods:       []corev1.Pod{waitingPod("apirule-controller-x", "manager", "ErrImagePull")},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonImagePullFailed,
			message: "pod apirule-controller-x container manager cannot pull image reg/apirule-controller:v1: ErrImagePull: back-off 40s",
		},
		"container creating is not a failure": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{waitingPod("apirule-controller-x", "manager", "ContainerCreating")},
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller rollout to finish: 1 of 2 updated replicas are available",
		},
		"terminating crash-looping pod is ignored": {
			deployment: newDeployment(),
			pods: func() []corev1.Pod {
				p := waitingPod("apirule-controller-old", "manager", "CrashLoopBackOff")
				p.DeletionTimestamp = &metav1.Time{}
				return []corev1.Pod{p}
			}(),
			phase: operatorv1alpha1.PhaseReady, reason: operatorv1alpha1.ReasonRolloutComplete,
			message: "deployment apirule-controller has 2 of 2 replicas ready",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Evaluate(tc.deployment, tc.pods)
			g.Expect(got.Phase).To(Equal(tc.phase))
			g.Expect(got.Reason).To(Equal(tc.reason))
			g.Expect(got.Message).To(Equal(tc.message))
			g.Expect(got.Replicas).To(Equal(*tc.deployment.Spec.Replicas))
			g.Expect(got.UpdatedReplicas).To(Equal(tc.deployment.Status.UpdatedReplicas))
			g.Expect(got.ReadyReplicas).To(Equal(tc.deployment.Status.ReadyReplicas))
		})
	}
}
