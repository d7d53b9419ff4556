package readiness

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// Result is a running controller's phase with its Deployment's counts.
type Result struct {
	Phase           operatorv1alpha1.ControllerPhase
	Reason          string
	Message         string
	Replicas        int32
	ReadyReplicas   int32
	UpdatedReplicas int32
}

// Evaluate derives the phase of a controller whose Deployment exists.
// Degraded wins over Progressing: a stuck rollout or a failing pod is
// reported even while a rollout is still in progress.
func Evaluate(d *appsv1.Deployment, pods []corev1.Pod) Result {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	r := Result{Replicas: replicas, ReadyReplicas: d.Status.ReadyReplicas, UpdatedReplicas: d.Status.UpdatedReplicas}
	set := func(phase operatorv1alpha1.ControllerPhase, reason, msg string, args ...any) Result {
		r.Phase, r.Reason, r.Message = phase, reason, fmt.Sprintf(msg, args...)
		return r
	}

	if reason, msg, failing := failingPod(pods); failing {
		return set(operatorv1alpha1.PhaseDegraded, reason, "%s", msg)
	}
	observed := d.Generation <= d.Status.ObservedGeneration
	if observed {
		// Pods that cannot be created (a missing ServiceAccount, a quota, an
		// admission webhook) never reach the pod checks above; the
		// Deployment says so at once, long before its progress deadline.
		if c := condition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
			return set(operatorv1alpha1.PhaseDegraded, operatorv1alpha1.ReasonReplicaFailure,
				"deployment %s cannot create pods: %s: %s", d.Name, c.Reason, c.Message)
		}
		if c := condition(d, appsv1.DeploymentProgressing); c != nil && c.Reason == "ProgressDeadlineExceeded" {
			return set(operatorv1alpha1.PhaseDegraded, operatorv1alpha1.ReasonProgressDeadlineExceeded,
				"deployment %s exceeded its progress deadline: %s", d.Name, c.Message)
		}
	}

	switch {
	case !observed:
		return set(operatorv1alpha1.PhaseProgressing, operatorv1alpha1.ReasonRolloutInProgress,
			"waiting for deployment %s spec update to be observed", d.Name)
	case d.Status.UpdatedReplicas < replicas:
		return set(operatorv1alpha1.PhaseProgressing, operatorv1alpha1.ReasonRolloutInProgress,
			"waiting for deployment %s rollout to finish: %d of %d new replicas have been updated", d.Name, d.Status.UpdatedReplicas, replicas)
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return set(operatorv1alpha1.PhaseProgressing, operatorv1alpha1.ReasonRolloutInProgress,
			"waiting for deployment %s rollout to finish: %d old replicas are pending termination", d.Name, d.Status.Replicas-d.Status.UpdatedReplicas)
	case d.Status.AvailableReplicas < d.Status.UpdatedReplicas:
		return set(operatorv1alpha1.PhaseProgressing, operatorv1alpha1.ReasonRolloutInProgress,
			"waiting for deployment %s rollout to finish: %d of %d updated replicas are available", d.Name, d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
	case replicas == 0:
		return set(operatorv1alpha1.PhaseReady, operatorv1alpha1.ReasonScaledToZero,
			"deployment %s is scaled to zero replicas", d.Name)
	default:
		return set(operatorv1alpha1.PhaseReady, operatorv1alpha1.ReasonRolloutComplete,
			"deployment %s has %d of %d replicas ready", d.Name, d.Status.ReadyReplicas, replicas)
	}
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// failingPod finds the first (by name) live pod with a failing container.
func failingPod(pods []corev1.Pod) (reason, message string, failing bool) {
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			sorted = append(sorted, &pods[i])
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, p := range sorted {
		for _, cs := range p.Status.InitContainerStatuses {
			if reason, message, failing := failingContainer(p.Name, cs, true); failing {
				return reason, message, true
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if reason, message, failing := failingContainer(p.Name, cs, false); failing {
				return reason, message, true
			}
		}
	}
	return "", "", false
}

// failingContainer reports a container stuck in a waiting reason that only
// changes when someone acts (an image, a Secret, a crashing binary), or
// crash looping.
//
// A crash-looping container alternates: waiting in CrashLoopBackOff, then
// running (not ready) for a moment, then terminated again. Judging by the
// waiting reason alone would flap Degraded/Progressing, with an Event each
// way, on every restart; a container that has restarted and is not ready
// since its last termination is still crash looping.
func failingContainer(pod string, cs corev1.ContainerStatus, init bool) (reason, message string, failing bool) {
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case "CrashLoopBackOff":
			return operatorv1alpha1.ReasonCrashLoopBackOff,
				fmt.Sprintf("pod %s container %s is in CrashLoopBackOff (%d restarts)%s", pod, cs.Name, cs.RestartCount, detail(w.Message)), true
		case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull":
			return operatorv1alpha1.ReasonImagePullFailed,
				fmt.Sprintf("pod %s container %s cannot pull image %s: %s%s", pod, cs.Name, cs.Image, w.Reason, detail(w.Message)), true
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return operatorv1alpha1.ReasonContainerStartFailed,
				fmt.Sprintf("pod %s container %s cannot start: %s%s", pod, cs.Name, w.Reason, detail(w.Message)), true
		}
	}
	if cs.Ready || cs.RestartCount == 0 {
		return "", "", false
	}
	last := cs.LastTerminationState.Terminated
	if t := cs.State.Terminated; t != nil {
		if init && t.ExitCode == 0 {
			return "", "", false // completed, as an init container should
		}
		last = t
	}
	if last == nil {
		return "", "", false
	}
	exit := fmt.Sprintf("exit code %d", last.ExitCode)
	if last.Reason != "" {
		exit += " (" + last.Reason + ")"
	}
	return operatorv1alpha1.ReasonCrashLoopBackOff,
		fmt.Sprintf("pod %s container %s is in CrashLoopBackOff (%d restarts): restarted after %s and is not ready", pod, cs.Name, cs.RestartCount, exit), true
}

// detail bounds a kubelet message; the status message has its own limit.
func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + contract.Truncate(msg, 512)
}
