package readiness

import (
	"strings"
	"testing"
	"unicode/utf8"

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

func withCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) deploymentOption {
	return func(d *appsv1.Deployment) {
		d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: message})
	}
}

const missingServiceAccount = `pods "apirule-controller-5d8-" is forbidden: error looking up service account portico-system/apirule-controller: serviceaccount "apirule-controller" not found`

type podOption func(*corev1.ContainerStatus)

// containerPod is a pod with one container "manager" in the given state.
func containerPod(name string, opts ...podOption) corev1.Pod {
	cs := corev1.ContainerStatus{Name: "manager", Image: "reg/apirule-controller:v1"}
	for _, o := range opts {
		o(&cs)
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
}

func waiting(reason, message string) podOption {
	return func(cs *corev1.ContainerStatus) {
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	}
}

func running(ready bool) podOption {
	return func(cs *corev1.ContainerStatus) {
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		cs.Ready = ready
	}
}

func terminated(exitCode int32, reason string) podOption {
	return func(cs *corev1.ContainerStatus) {
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason}}
	}
}

// crashed records a previous failed run: restarts and the last termination.
func crashed(restarts int32, exitCode int32, reason string) podOption {
	return func(cs *corev1.ContainerStatus) {
		cs.RestartCount = restarts
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason}}
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
		"replica failure: the pods cannot be created": {
			deployment: newDeployment(withStatus(2, 0, 0, 0, 0),
				withCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", missingServiceAccount)),
			phase: operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonReplicaFailure,
			message: "deployment apirule-controller cannot create pods: FailedCreate: " + missingServiceAccount,
		},
		"replica failure is more precise than the progress deadline": {
			deployment: newDeployment(withStatus(2, 0, 0, 0, 0), withProgressing("ProgressDeadlineExceeded"),
				withCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", `pods "x" is forbidden: exceeded quota: compute`)),
			phase: operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonReplicaFailure,
			message: `deployment apirule-controller cannot create pods: FailedCreate: pods "x" is forbidden: exceeded quota: compute`,
		},
		"resolved replica failure is ignored": {
			deployment: newDeployment(withCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionFalse, "FailedCreate", missingServiceAccount)),
			phase:      operatorv1alpha1.PhaseReady, reason: operatorv1alpha1.ReasonRolloutComplete,
			message: "deployment apirule-controller has 2 of 2 replicas ready",
		},
		"stale replica failure is ignored until observed": {
			deployment: newDeployment(withStatus(1, 0, 0, 0, 0),
				withCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", missingServiceAccount)),
			phase: operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller spec update to be observed",
		},
		"invalid image name": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", waiting("InvalidImageName", `couldn't parse image name "reg/Apirule:v1"`))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonImagePullFailed,
			message: `pod apirule-controller-x container manager cannot pull image reg/apirule-controller:v1: InvalidImageName: couldn't parse image name "reg/Apirule:v1"`,
		},
		"image never pulled": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", waiting("ErrImageNeverPull", ""))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonImagePullFailed,
			message: "pod apirule-controller-x container manager cannot pull image reg/apirule-controller:v1: ErrImageNeverPull",
		},
		"missing secret in env": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", waiting("CreateContainerConfigError", `secret "proxy" not found`))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonContainerStartFailed,
			message: `pod apirule-controller-x container manager cannot start: CreateContainerConfigError: secret "proxy" not found`,
		},
		"container cannot be created": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", waiting("CreateContainerError", "context deadline exceeded"))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonContainerStartFailed,
			message: "pod apirule-controller-x container manager cannot start: CreateContainerError: context deadline exceeded",
		},
		"container cannot be run": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", waiting("RunContainerError", "exec: /manager: permission denied"))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonContainerStartFailed,
			message: "pod apirule-controller-x container manager cannot start: RunContainerError: exec: /manager: permission denied",
		},
		"crash looping container running between two crashes": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", running(false), crashed(5, 1, "Error"))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonCrashLoopBackOff,
			message: "pod apirule-controller-x container manager is in CrashLoopBackOff (5 restarts): restarted after exit code 1 (Error) and is not ready",
		},
		"crash looping container just terminated, before its back-off": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", crashed(5, 1, "Error"), terminated(2, "Error"))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonCrashLoopBackOff,
			message: "pod apirule-controller-x container manager is in CrashLoopBackOff (5 restarts): restarted after exit code 2 (Error) and is not ready",
		},
		"crash looping container that exits 0 is still crash looping": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", crashed(2, 0, "Completed"), terminated(0, "Completed"))},
			phase:      operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonCrashLoopBackOff,
			message: "pod apirule-controller-x container manager is in CrashLoopBackOff (2 restarts): restarted after exit code 0 (Completed) and is not ready",
		},
		"crash looping init container": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods: func() []corev1.Pod {
				p := containerPod("apirule-controller-x", waiting("PodInitializing", ""))
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
					Name: "init", RestartCount: 2,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
				}}
				return []corev1.Pod{p}
			}(),
			phase: operatorv1alpha1.PhaseDegraded, reason: operatorv1alpha1.ReasonCrashLoopBackOff,
			message: "pod apirule-controller-x container init is in CrashLoopBackOff (2 restarts): restarted after exit code 1 (Error) and is not ready",
		},
		"restarted container that is ready again is healthy": {
			deployment: newDeployment(),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", running(true), crashed(3, 137, "OOMKilled"))},
			phase:      operatorv1alpha1.PhaseReady, reason: operatorv1alpha1.ReasonRolloutComplete,
			message: "deployment apirule-controller has 2 of 2 replicas ready",
		},
		"first start not ready yet is progressing": {
			deployment: newDeployment(withStatus(2, 2, 2, 1, 1)),
			pods:       []corev1.Pod{containerPod("apirule-controller-x", running(false))},
			phase:      operatorv1alpha1.PhaseProgressing, reason: operatorv1alpha1.ReasonRolloutInProgress,
			message: "waiting for deployment apirule-controller rollout to finish: 1 of 2 updated replicas are available",
		},
		"completed init container is healthy": {
			deployment: newDeployment(),
			pods: func() []corev1.Pod {
				p := containerPod("apirule-controller-x", running(true))
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
					Name: "init", RestartCount: 1, Ready: false,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
				}}
				return []corev1.Pod{p}
			}(),
			phase: operatorv1alpha1.PhaseReady, reason: operatorv1alpha1.ReasonRolloutComplete,
			message: "deployment apirule-controller has 2 of 2 replicas ready",
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

// A crash-looping container alternates between waiting in CrashLoopBackOff
// and running (not ready) until its next crash; the phase must not follow.
func TestCrashLoopDoesNotFlap(t *testing.T) {
	g := NewWithT(t)
	d := newDeployment(withStatus(2, 2, 2, 0, 0))
	cycle := []corev1.Pod{
		containerPod("apirule-controller-x", waiting("CrashLoopBackOff", "back-off 10s restarting failed container"), crashed(0, 1, "Error")),
		containerPod("apirule-controller-x", running(false), crashed(1, 1, "Error")),
		containerPod("apirule-controller-x", terminated(1, "Error"), crashed(1, 1, "Error")),
		containerPod("apirule-controller-x", waiting("CrashLoopBackOff", "back-off 20s restarting failed container"), crashed(1, 1, "Error")),
		containerPod("apirule-controller-x", running(false), crashed(2, 1, "Error")),
		containerPod("apirule-controller-x", waiting("CrashLoopBackOff", "back-off 40s restarting failed container"), crashed(2, 1, "Error")),
	}
	for i, pod := range cycle {
		got := Evaluate(d, []corev1.Pod{pod})
		g.Expect(got.Phase).To(Equal(operatorv1alpha1.PhaseDegraded), "step %d", i)
		g.Expect(got.Reason).To(Equal(operatorv1alpha1.ReasonCrashLoopBackOff), "step %d", i)
		g.Expect(got.Message).To(HavePrefix("pod apirule-controller-x container manager is in CrashLoopBackOff"), "step %d", i)
	}
}

func TestFailingPodMessageIsValidUTF8(t *testing.T) {
	g := NewWithT(t)
	long := "x" + strings.Repeat("é", 600) // 1201 bytes: a cut at an even length falls inside a character
	got := Evaluate(newDeployment(), []corev1.Pod{containerPod("apirule-controller-x", waiting("CrashLoopBackOff", long))})
	g.Expect(utf8.ValidString(got.Message)).To(BeTrue())
	g.Expect(len(got.Message)).To(BeNumerically("<", 700))
}
