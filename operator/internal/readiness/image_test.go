package readiness

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/portico-dev/portico/internal/contract"
)

const (
	digestA = "reg/apirule-controller@sha256:aaaa"
	digestB = "reg/apirule-controller@sha256:bbbb"
	digestC = "reg/apirule-controller@sha256:cccc"
)

// template is a controller pod template running image.
func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "apirule-controller"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: image}}},
	}
}

func imageDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "apirule-controller", UID: "deploy"},
		Spec:       appsv1.DeploymentSpec{Template: template("reg/apirule-controller:v2")},
	}
}

func controllerRef(uid types.UID, controller bool) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(uid), UID: uid, Controller: ptr.To(controller)}}
}

// replicaSet is a ReplicaSet of the given template, controlled by owner,
// as the deployment controller creates it: the template gains the
// pod-template-hash label.
func replicaSet(uid, owner types.UID, tmpl corev1.PodTemplateSpec) appsv1.ReplicaSet {
	tmpl = *tmpl.DeepCopy()
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = string(uid)
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "apirule-controller-" + string(uid), UID: uid, OwnerReferences: controllerRef(owner, true)},
		Spec:       appsv1.ReplicaSetSpec{Template: tmpl},
	}
}

type imagePodOption func(*corev1.Pod)

// imagePod is a pod of ReplicaSet rs whose container "manager" runs digest.
func imagePod(name string, rs types.UID, ready bool, digest string, opts ...imagePodOption) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: controllerRef(rs, true)},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "manager", Image: "reg/apirule-controller:v2", ImageID: digest, Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func deletingPod(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }

func TestImageID(t *testing.T) {
	current := template("reg/apirule-controller:v2")
	newRS := replicaSet("new", "deploy", current)
	oldRS := replicaSet("old", "deploy", template("reg/apirule-controller:v1"))
	envOnly := template("reg/apirule-controller:v2")
	envOnly.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}
	sameImageRS := replicaSet("env", "deploy", envOnly)
	withEmptyMaps := replicaSet("new", "deploy", current)
	withEmptyMaps.Spec.Template.Annotations = map[string]string{}
	withEmptyMaps.Spec.Template.Spec.NodeSelector = map[string]string{}
	notControlling := replicaSet("new", "deploy", current)
	notControlling.OwnerReferences = controllerRef("deploy", false)
	noUID := imageDeployment()
	noUID.UID = ""

	sidecar := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: "istio-proxy", ImageID: digestC, Ready: true,
		})
	}
	rewritten := func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Image = "mirror.internal/apirule-controller:v2" }
	overlong := "reg/apirule-controller@sha256:" + strings.Repeat("f", contract.ImageIDMaxLength)

	for name, tc := range map[string]struct {
		deployment  *appsv1.Deployment
		replicaSets []appsv1.ReplicaSet
		pods        []corev1.Pod
		want        string
	}{
		"no ReplicaSet yet": {
			pods: []corev1.Pod{imagePod("a", "new", true, digestA)},
			want: "",
		},
		"a ready pod of the current template": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA)},
			want:        digestA,
		},
		"no pod yet": {
			replicaSets: []appsv1.ReplicaSet{newRS, oldRS},
			want:        "",
		},
		"the current template's pod is not ready, the old one is": {
			replicaSets: []appsv1.ReplicaSet{newRS, oldRS},
			pods:        []corev1.Pod{imagePod("a", "new", false, digestB), imagePod("b", "old", true, digestA)},
			want:        "",
		},
		"mid-rollout: only the current template's pods count": {
			replicaSets: []appsv1.ReplicaSet{newRS, oldRS},
			pods: []corev1.Pod{
				imagePod("a", "old", true, digestA), imagePod("b", "old", true, digestA), imagePod("c", "new", true, digestB),
			},
			want: digestB,
		},
		"an older template with the same image does not count": {
			replicaSets: []appsv1.ReplicaSet{newRS, sameImageRS},
			pods:        []corev1.Pod{imagePod("a", "env", true, digestA), imagePod("b", "new", false, digestB)},
			want:        "",
		},
		"nil and empty maps in the templates are equal": {
			replicaSets: []appsv1.ReplicaSet{withEmptyMaps},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA)},
			want:        digestA,
		},
		"a pod whose image a webhook rewrote still counts": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA, rewritten)},
			want:        digestA,
		},
		"a terminating pod does not count": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA, deletingPod), imagePod("b", "new", true, digestB)},
			want:        digestB,
		},
		"only the controller container counts": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("a", "new", false, digestA, sidecar)},
			want:        "",
		},
		"a ready container without an imageID does not count": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("a", "new", true, "")},
			want:        "",
		},
		"an imageID longer than the API allows is not reported": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("a", "new", true, overlong)},
			want:        "",
		},
		"disagreeing pods: the digest most run": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods: []corev1.Pod{
				imagePod("a", "new", true, digestA), imagePod("b", "new", true, digestB), imagePod("c", "new", true, digestB),
			},
			want: digestB,
		},
		"disagreeing pods, tied: the lexicographically first digest": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods:        []corev1.Pod{imagePod("b", "new", true, digestB), imagePod("a", "new", true, digestA)},
			want:        digestA,
		},
		"a ReplicaSet of the same template controlled by another Deployment": {
			replicaSets: []appsv1.ReplicaSet{replicaSet("new", "someone-else", current)},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA)},
			want:        "",
		},
		"a ReplicaSet the Deployment owns but does not control": {
			replicaSets: []appsv1.ReplicaSet{notControlling},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA)},
			want:        "",
		},
		"a pod owned but not controlled by the ReplicaSet": {
			replicaSets: []appsv1.ReplicaSet{newRS},
			pods: []corev1.Pod{imagePod("a", "new", true, digestA, func(p *corev1.Pod) {
				p.OwnerReferences = controllerRef("new", false)
			})},
			want: "",
		},
		"a Deployment without a UID matches nothing": {
			deployment:  noUID,
			replicaSets: []appsv1.ReplicaSet{replicaSet("new", "", current)},
			pods:        []corev1.Pod{imagePod("a", "new", true, digestA)},
			want:        "",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			d := tc.deployment
			if d == nil {
				d = imageDeployment()
			}
			before := d.DeepCopy()
			g.Expect(ImageID(d, tc.replicaSets, tc.pods, "manager")).To(Equal(tc.want))
			g.Expect(d).To(Equal(before), "ImageID does not mutate the Deployment")
		})
	}
}

// Map iteration order must not change the answer on a tie.
func TestImageIDIsStable(t *testing.T) {
	g := NewWithT(t)
	d := imageDeployment()
	rs := []appsv1.ReplicaSet{replicaSet("new", "deploy", d.Spec.Template)}
	pods := []corev1.Pod{
		imagePod("a", "new", true, digestC), imagePod("b", "new", true, digestB), imagePod("c", "new", true, digestA),
	}
	for range 50 {
		g.Expect(ImageID(d, rs, pods, "manager")).To(Equal(digestA))
	}
}
