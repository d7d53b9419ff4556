//go:build e2e

package e2e

import (
	"context"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
)

// disruptionBudgetSpecs are the story of an administrator who runs the
// apirule controller with two replicas and drains its node: the operator
// gives the controller a PodDisruptionBudget (maxUnavailable 1 by default),
// the Eviction API takes its pods one at a time and refuses to take the
// last ready one while the other is unavailable; back to one replica, the
// budget is gone, so it never blocks a drain.
//
// Call it inside the Portico Describe (an Ordered container) once the
// controllers are Ready. The specs run on the node target only (real pods,
// a real disruption controller) and leave the apirule controller at its
// defaults (no spec.controllers entry).
func disruptionBudgetSpecs() {
	const name = "apirule-controller"
	budgetKey := client.ObjectKey{Namespace: namespace, Name: name}
	skipUnlessNode := func() {
		if target != framework.TargetNode {
			Skip("the eviction specs run on the node target: they need real pods and kube-controller-manager's disruption controller")
		}
	}
	// readyPods are the controller's ready pods that are not being deleted.
	readyPods := func(ctx context.Context) []corev1.Pod {
		return slices.DeleteFunc(podsOf(ctx, name), func(p corev1.Pod) bool {
			return p.DeletionTimestamp != nil || !podReady(p)
		})
	}
	evict := func(ctx context.Context, pod corev1.Pod) error {
		return clientset.CoreV1().Pods(namespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: pod.Name},
		})
	}
	// awaitTwoReady waits for two ready replicas and a budget that allows
	// one disruption.
	awaitTwoReady := func(ctx context.Context) {
		Eventually(func(g Gomega) {
			g.Expect(readyPods(ctx)).To(HaveLen(2))
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(k8sClient.Get(ctx, budgetKey, pdb)).To(Succeed())
			g.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation))
			g.Expect(pdb.Status.CurrentHealthy).To(BeEquivalentTo(2))
			g.Expect(pdb.Status.DisruptionsAllowed).To(BeEquivalentTo(1))
		}, timeout, interval).Should(Succeed())
	}

	It("gives a controller scaled to two replicas a PodDisruptionBudget of maxUnavailable 1 over its pods", func(ctx SpecContext) {
		skipUnlessNode()
		setController(operatorv1alpha1.ControllerSpec{Name: apirule, Replicas: ptr.To[int32](2)})
		Eventually(func(g Gomega) {
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(k8sClient.Get(ctx, budgetKey, pdb)).To(Succeed())
			g.Expect(pdb.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
			g.Expect(pdb.Spec.Selector).To(Equal(deployment(g, name).Spec.Selector))
			g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		}, timeout, interval).Should(Succeed())
		awaitTwoReady(ctx)
	})

	It("evicts the controller's pods one at a time and refuses to evict the last ready one", func(ctx SpecContext) {
		skipUnlessNode()
		awaitTwoReady(ctx)
		pods := readyPods(ctx)

		By("evicting the first pod: the budget allows one disruption")
		Expect(evict(ctx, pods[0])).To(Succeed())

		By("evicting the other, the last ready replica, while the first one's replacement is not ready yet")
		err := evict(ctx, pods[1])
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "want 429 TooManyRequests, got %v", err)
		Expect(err.Error()).To(ContainSubstring("Cannot evict pod as it would violate the pod's disruption budget"))
		Expect(readyPods(ctx)).To(ContainElement(HaveField("Name", pods[1].Name)), "the refused pod keeps running")

		By("evicting it once the replacement is ready: the drain goes on, one pod at a time")
		awaitTwoReady(ctx)
		Eventually(func() error { return evict(ctx, pods[1]) }, timeout, interval).Should(Succeed())
		awaitTwoReady(ctx)
		Eventually(func(g Gomega) {
			g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		}, timeout, interval).Should(Succeed())
	})

	It("removes the budget when the controller is back to one replica, so it never blocks a drain", func(ctx SpecContext) {
		skipUnlessNode()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Controllers = slices.DeleteFunc(gw.Spec.Controllers, func(c operatorv1alpha1.ControllerSpec) bool { return c.Name == apirule })
		})
		Eventually(isGone(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}), timeout, interval).Should(BeTrue())
		Eventually(func(g Gomega) {
			g.Expect(readyPods(ctx)).To(HaveLen(1))
			g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		}, timeout, interval).Should(Succeed())
		By("evicting the single pod: nothing refuses it")
		Expect(evict(ctx, readyPods(ctx)[0])).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyPods(ctx)).To(HaveLen(1))
			g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		}, timeout, interval).Should(Succeed())
	})
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
