package reconciler_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func getBudget(g Gomega, name string) *policyv1.PodDisruptionBudget {
	b := &policyv1.PodDisruptionBudget{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, b)).To(Succeed())
	return b
}

func budgetGone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &policyv1.PodDisruptionBudget{}))
	}
}

func setReplicas(t *testing.T, name operatorv1alpha1.ControllerName, replicas int32) {
	t.Helper()
	updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.Controllers = []operatorv1alpha1.ControllerSpec{{Name: name, Replicas: ptr.To(replicas)}}
	})
}

// A controller gets a PodDisruptionBudget only while it runs more than one
// replica; the operator keeps it as rendered (self-healing, drift repair)
// and, settled, writes nothing.
func TestDisruptionBudgetFollowsReplicas(t *testing.T) {
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	gw := createGateway(t, operatorv1alpha1.ControllerSpec{Name: apirule, Replicas: ptr.To[int32](3)})

	var original *policyv1.PodDisruptionBudget
	t.Run("three replicas: maxUnavailable 1 over exactly the controller's pods, and a spread across nodes", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) { original = getBudget(g, "apirule-controller") }, eventually).Should(Succeed())
		g.Expect(original.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
		g.Expect(original.Spec.MinAvailable).To(BeNil())
		d := awaitDeployment(t, "apirule-controller")
		g.Expect(original.Spec.Selector).To(Equal(d.Spec.Selector), "the budget selects what the Deployment selects")
		owner := metav1.GetControllerOf(original)
		g.Expect(owner).NotTo(BeNil())
		g.Expect(owner.Kind).To(Equal("APIGateway"))
		g.Expect(owner.UID).To(Equal(gw.UID))
		spread := d.Spec.Template.Spec.TopologySpreadConstraints
		g.Expect(spread).To(HaveLen(1))
		g.Expect(spread[0].TopologyKey).To(Equal("kubernetes.io/hostname"))
		g.Expect(budgetGone("ratelimit-controller")()).To(BeTrue(), "one replica: no budget")
	})

	t.Run("a deleted budget comes back", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Delete(ctx, original)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getBudget(g, "apirule-controller").UID).NotTo(Equal(original.UID))
		}, eventually).Should(Succeed())
	})

	t.Run("an edited budget is put back, a foreign label kept", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			b := getBudget(g, "apirule-controller")
			b.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) // would block every drain
			b.Labels["team.example/cost-center"] = "42"
			return k8sClient.Update(ctx, b, client.FieldOwner("kubectl-edit"))
		}, eventually).Should(Succeed())
		g.Eventually(func(g Gomega) {
			b := getBudget(g, "apirule-controller")
			g.Expect(b.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
			g.Expect(b.Labels).To(HaveKeyWithValue("team.example/cost-center", "42"))
		}, eventually).Should(Succeed())
	})

	t.Run("settled, nothing is written", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range []string{"apirule-controller", "ratelimit-controller", "gateway-controller"} {
			setRollout(t, name, rolledOut)
		}
		g.Eventually(func(g Gomega) {
			g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
		}, eventually).Should(Succeed())
		expectIdle(t, func() []string {
			return []string{getDeployment(g, "apirule-controller").ResourceVersion, getBudget(g, "apirule-controller").ResourceVersion}
		})
	})

	t.Run("a budget the spec sets replaces the default", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Controllers[0].PodDisruptionBudget = &operatorv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))}
		})
		g.Eventually(func(g Gomega) {
			b := getBudget(g, "apirule-controller")
			g.Expect(b.Spec.MinAvailable).To(Equal(ptr.To(intstr.FromString("50%"))))
			g.Expect(b.Spec.MaxUnavailable).To(BeNil(), "the operator no longer owns it, the apply removed it")
		}, eventually).Should(Succeed())
	})

	t.Run("back to one replica: the budget is deleted, and the spread", func(t *testing.T) {
		g := NewWithT(t)
		setReplicas(t, apirule, 1)
		g.Eventually(budgetGone("apirule-controller"), eventually).Should(BeTrue())
		g.Eventually(func(g Gomega) {
			g.Expect(getDeployment(g, "apirule-controller").Spec.Template.Spec.TopologySpreadConstraints).To(BeEmpty())
		}, eventually).Should(Succeed())
	})

	t.Run("three again: it is back", func(t *testing.T) {
		setReplicas(t, apirule, 3)
		NewWithT(t).Eventually(func(g Gomega) { getBudget(g, "apirule-controller") }, eventually).Should(Succeed())
	})
}

// A budget that carries the operator's labels but that no APIGateway
// controls (someone else's) is neither deleted nor taken over.
func TestForeignBudgetIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	foreign := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "ratelimit-controller", Namespace: namespace, Labels: map[string]string{
			"app.kubernetes.io/managed-by": operatorv1alpha1.ManagedBy, operatorv1alpha1.LabelController: string(ratelimit),
		}},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}},
	}
	g.Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, foreign) })
	createGateway(t)
	awaitDeployment(t, "ratelimit-controller")
	g.Consistently(func(g Gomega) {
		b := getBudget(g, "ratelimit-controller")
		g.Expect(b.UID).To(Equal(foreign.UID))
		g.Expect(b.Spec.Selector.MatchLabels).To(Equal(map[string]string{"x": "y"}))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// extraArgs reach the container; an unknown or reserved flag refuses the
// controller with InvalidSpec and leaves its Deployment exactly as it was.
func TestExtraArgsRefusalLeavesTheDeployment(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t, operatorv1alpha1.ControllerSpec{Name: apirule, Replicas: ptr.To[int32](2), ExtraArgs: []string{"--kube-api-qps=50"}})
	g.Eventually(func(g Gomega) {
		g.Expect(getDeployment(g, "apirule-controller").Spec.Template.Spec.Containers[0].Args).To(ContainElement("--kube-api-qps=50"))
		getBudget(g, "apirule-controller")
	}, eventually).Should(Succeed())
	for _, name := range []string{"apirule-controller", "ratelimit-controller", "gateway-controller"} {
		setRollout(t, name, rolledOut)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
	}, eventually).Should(Succeed())
	before := getDeployment(g, "apirule-controller")
	budgetBefore := getBudget(g, "apirule-controller")

	for arg, message := range map[string]string{
		"--leader-elect=false":    "extraArgs flag --leader-elect is set by the operator and may not be overridden",
		"--debug-everything=true": "extraArgs flag --debug-everything is not a flag of apirule-controller",
	} {
		t.Run(arg, func(t *testing.T) {
			g := NewWithT(t)
			updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
				gw.Spec.Controllers[0].ExtraArgs = []string{"--kube-api-qps=80", arg}
				gw.Spec.Controllers[0].Replicas = ptr.To[int32](1) // would delete the budget, were the spec applied
			})
			g.Eventually(func(g Gomega) {
				expectDegraded(g, apirule, operatorv1alpha1.ReasonInvalidSpec, ContainSubstring(message))
			}, eventually).Should(Succeed())
			expectIdle(t, func() []string {
				return []string{getDeployment(g, "apirule-controller").ResourceVersion, getBudget(g, "apirule-controller").ResourceVersion}
			})
			g.Expect(getDeployment(g, "apirule-controller").ResourceVersion).To(Equal(before.ResourceVersion), "the Deployment is left as it was")
			g.Expect(getBudget(g, "apirule-controller").ResourceVersion).To(Equal(budgetBefore.ResourceVersion), "and its budget")
			st := controllerStatus(g, apirule)
			g.Expect(st.Replicas).To(BeEquivalentTo(2), "status reports the Deployment that runs")
		})
	}

	t.Run("fixed, the spec is applied", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Controllers[0].ExtraArgs = []string{"--kube-api-qps=80"}
		})
		g.Eventually(func(g Gomega) {
			d := getDeployment(g, "apirule-controller")
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--kube-api-qps=80"))
			g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1))
		}, eventually).Should(Succeed())
		g.Eventually(budgetGone("apirule-controller"), eventually).Should(BeTrue())
	})
}
