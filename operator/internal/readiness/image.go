package readiness

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/contract"
)

// ImageID returns the image digest that the ready pods of the Deployment's
// current pod template run in the named container, as the container
// runtime reports it (containerStatuses[].imageID), or "" when no such pod
// is ready.
//
// The current template's pods are those of the Deployment's ReplicaSets
// whose template is the Deployment's, apart from the pod-template-hash
// label: the rule the deployment controller itself finds its new
// ReplicaSet by. Comparing images instead would miss pods whose image an
// admission webhook rewrote (a registry mirror), and would count pods of an
// older template that names the same mutable tag.
//
// Should ready pods disagree (a mutable tag resolved at different times on
// different nodes), the digest most of them run wins, and of digests tied
// the lexicographically first, so the answer does not flap between
// reconciles. A digest longer than the API accepts is never reported: a
// truncated digest would name another image, and a status write it made
// fail would fail on every reconcile.
func ImageID(d *appsv1.Deployment, replicaSets []appsv1.ReplicaSet, pods []corev1.Pod, container string) string {
	current := map[types.UID]bool{}
	for i := range replicaSets {
		rs := &replicaSets[i]
		if rs.UID != "" && d.UID != "" && controller(rs.OwnerReferences) == d.UID && equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			current[rs.UID] = true
		}
	}
	if len(current) == 0 {
		return ""
	}
	counts := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !current[controller(p.OwnerReferences)] {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == container && cs.Ready && cs.ImageID != "" && len(cs.ImageID) <= contract.ImageIDMaxLength {
				counts[cs.ImageID]++
			}
		}
	}
	best, most := "", 0
	for id, n := range counts {
		if n > most || (n == most && id < best) {
			best, most = id, n
		}
	}
	return best
}

// controller returns the UID of the controller among refs, or "".
func controller(refs []metav1.OwnerReference) types.UID {
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}

// equalIgnoreHash compares pod templates as the deployment controller
// does: a ReplicaSet's template is its Deployment's plus the
// pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}
