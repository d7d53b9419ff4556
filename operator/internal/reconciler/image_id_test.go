package reconciler_test

import (
	"context"
	"maps"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// runTemplate plays the deployment controller and the kubelet for the
// Deployment's current template: it creates the template's ReplicaSet and
// one pod of it whose controller container is ready and runs digest.
func runTemplate(t *testing.T, deployment, hash, digest string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	d := getDeployment(g, deployment)

	labels := maps.Clone(d.Spec.Template.Labels)
	labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	template := *d.Spec.Template.DeepCopy()
	template.Labels = labels
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: deployment + "-" + hash, Namespace: namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template},
	}
	g.Expect(k8sClient.Create(ctx, rs)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, rs) })

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: rs.Name + "-x2x4k", Namespace: namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true),
			}},
		},
		// A webhook may have rewritten the image: only the owner counts.
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "mirror.internal/" + deployment + ":" + hash}}},
	}
	g.Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "manager", Image: pod.Spec.Containers[0].Image, ImageID: digest, Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
	g.Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

// status.controllers[].imageID reports the digest the ready pods of the
// Deployment's current template run: empty before such a pod is ready,
// empty again as soon as the template changes while the old pods still
// run, then the new pods' digest.
func TestImageIDFollowsTheCurrentTemplate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const (
		digestV1 = "registry.test/portico/apirule-controller@sha256:1111111111111111111111111111111111111111111111111111111111111111"
		digestV2 = "airgap.local/apirule@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	setCRDs(t, allCRDs...)
	createGateway(t, operatorv1alpha1.ControllerSpec{Name: ratelimit, Enabled: ptr.To(false)})
	awaitDeployment(t, "apirule-controller")
	setRollout(t, "apirule-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		rule := controllerStatus(g, apirule)
		g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseReady))
		g.Expect(rule.ImageID).To(BeEmpty(), "no pod runs yet")
		g.Expect(controllerStatus(g, ratelimit).ImageID).To(BeEmpty(), "a disabled controller has none")
	}, eventually).Should(Succeed())

	runTemplate(t, "apirule-controller", "5d8f", digestV1)
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, apirule).ImageID).To(Equal(digestV1))
	}, eventually).Should(Succeed())

	updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.Controllers = append(gw.Spec.Controllers, operatorv1alpha1.ControllerSpec{Name: apirule, Image: "airgap.local/apirule:v2"})
	})
	g.Eventually(func(g Gomega) {
		rule := controllerStatus(g, apirule)
		g.Expect(rule.Image).To(Equal("airgap.local/apirule:v2"))
		g.Expect(rule.ImageID).To(BeEmpty(), "the old template's pod still runs, but no pod of the new one")
	}, eventually).Should(Succeed())

	runTemplate(t, "apirule-controller", "7c9b", digestV2)
	setRollout(t, "apirule-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		rule := controllerStatus(g, apirule)
		g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseReady))
		g.Expect(rule.ImageID).To(Equal(digestV2))
	}, eventually).Should(Succeed())

	// The digest is stable: reporting it causes no further writes.
	expectIdle(t, func() []string {
		gw := &operatorv1alpha1.APIGateway{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
		return []string{gw.ResourceVersion, getDeployment(g, "apirule-controller").ResourceVersion}
	})
}
