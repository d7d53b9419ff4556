package readiness

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
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
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return set(operatorv1alpha1.PhaseDegraded, operatorv1alpha1.ReasonProgressDeadlineExceeded,
					"deployment %s exceeded its progress deadline: %s", d.Name, c.Message)
			}
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

// failingPod finds the first (by name) live pod with a container stuck in
// CrashLoopBackOff or failing to pull its image.
func failingPod(pods []corev1.Pod) (reason, message string, failing bool) {
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			sorted = append(sorted, &pods[i])
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, p := range sorted {
		statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, cs := range statuses {
			if cs.State.Waiting == nil {
				continue
			}
			w := cs.State.Waiting
			switch w.Reason {
			case "CrashLoopBackOff":
				return operatorv1alpha1.ReasonCrashLoopBackOff,
					fmt.Sprintf("pod %s container %s is in CrashLoopBackOff (%d restarts)%s", p.Name, cs.Name, cs.RestartCount, detail(w.Message)), true
			case "ImagePullBackOff", "ErrImagePull":
				return operatorv1alpha1.ReasonImagePullFailed,
					fmt.Sprintf("pod %s container %s cannot pull image %s: %s%s", p.Name, cs.Name, cs.Image, w.Reason, detail(w.Message)), true
			}
		}
	}
	return "", "", false
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	const limit = 512
	if len(msg) > limit {
		msg = msg[:limit] + "…"
	}
	return ": " + msg
}
