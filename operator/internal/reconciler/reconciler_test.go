package reconciler_test

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

const (
	apirule    = operatorv1alpha1.ControllerAPIRule
	ratelimit  = operatorv1alpha1.ControllerRateLimit
	gatewayCtl = operatorv1alpha1.ControllerGateway
)

func TestControllersWaitForIstioThenRollOut(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, gatewayCRDs...)
	createGateway(t)

	g.Eventually(func(g Gomega) {
		st := gatewayStatus(g)
		g.Expect(st.State).To(Equal(operatorv1alpha1.StateWarning))
		g.Expect(st.Ready).To(Equal("0/3"))
		rule := controllerStatus(g, apirule)
		g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
		g.Expect(rule.Reason).To(Equal(operatorv1alpha1.ReasonCRDNotFound))
		g.Expect(rule.MissingCRDs).To(ConsistOf(
			"virtualservices.networking.istio.io/v1",
			"authorizationpolicies.security.istio.io/v1",
			"requestauthentications.security.istio.io/v1"))
		g.Expect(rule.Message).To(ContainSubstring("virtualservices.networking.istio.io/v1"))
		limit := controllerStatus(g, ratelimit)
		g.Expect(limit.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
		g.Expect(limit.MissingCRDs).To(ConsistOf("envoyfilters.networking.istio.io/v1alpha3"))
		gw := controllerStatus(g, gatewayCtl)
		g.Expect(gw.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
		g.Expect(gw.Reason).To(Equal(operatorv1alpha1.ReasonCRDNotFound))
		g.Expect(gw.MissingCRDs).To(ConsistOf("gateways.networking.istio.io/v1", "virtualservices.networking.istio.io/v1"),
			"its own APIGateway CRD is installed; cert-manager's is not needed without spec.gateway")
	}, eventually).Should(Succeed())
	g.Expect(deploymentGone("apirule-controller")()).To(BeTrue())
	g.Expect(deploymentGone("ratelimit-controller")()).To(BeTrue())
	g.Expect(deploymentGone("gateway-controller")()).To(BeTrue())

	g.Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8sClient.List(context.Background(), &list)).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == operatorv1alpha1.SingletonName && e.Regarding.Kind == "APIGateway" {
				reasons = append(reasons, e.Reason)
			}
		}
		g.Expect(reasons).To(ContainElement(operatorv1alpha1.ReasonCRDNotFound))
	}, eventually).Should(Succeed(), "a phase transition is recorded as an Event")

	setCRDs(t, allCRDs...)
	g.Eventually(func(g Gomega) {
		rule := getDeployment(g, "apirule-controller")
		g.Expect(rule.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "portico-operator"))
		g.Expect(rule.OwnerReferences).To(ConsistOf(HaveField("Kind", "APIGateway")))
		getDeployment(g, "ratelimit-controller")
		getDeployment(g, "gateway-controller")
		st := gatewayStatus(g)
		g.Expect(st.State).To(Equal(operatorv1alpha1.StateProcessing))
		g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
		g.Expect(controllerStatus(g, apirule).MissingCRDs).To(BeEmpty())
		g.Expect(controllerStatus(g, gatewayCtl).Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
		g.Expect(controllerStatus(g, gatewayCtl).MissingCRDs).To(BeEmpty())
	}, eventually).Should(Succeed())
}

func TestRemovedCRDRemovesOnlyItsController(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t)
	var before, gatewayBefore *appsv1.Deployment
	g.Eventually(func(g Gomega) {
		before = getDeployment(g, "apirule-controller")
		getDeployment(g, "ratelimit-controller")
		gatewayBefore = getDeployment(g, "gateway-controller")
	}, eventually).Should(Succeed())

	setCRDs(t, slices.DeleteFunc(slices.Clone(allCRDs), func(name string) bool { return name == "envoyfilters.networking.istio.io" })...)
	g.Eventually(deploymentGone("ratelimit-controller"), eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		limit := controllerStatus(g, ratelimit)
		g.Expect(limit.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
		g.Expect(limit.MissingCRDs).To(Equal([]string{"envoyfilters.networking.istio.io/v1alpha3"}))
	}, eventually).Should(Succeed())

	after := getDeployment(g, "apirule-controller")
	g.Expect(after.UID).To(Equal(before.UID))
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "apirule's Deployment is untouched")
	gatewayAfter := getDeployment(g, "gateway-controller")
	g.Expect(gatewayAfter.UID).To(Equal(gatewayBefore.UID))
	g.Expect(gatewayAfter.ResourceVersion).To(Equal(gatewayBefore.ResourceVersion), "gateway's Deployment is untouched")
}

func TestVersionNoLongerServedBlocks(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t)
	awaitDeployment(t, "ratelimit-controller")

	// Stop serving v1alpha3 of EnvoyFilter (keep it as storage).
	g.Eventually(func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: "envoyfilters.networking.istio.io"}, crd); err != nil {
			return err
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Served = false
		}
		return k8sClient.Update(context.Background(), crd)
	}, eventually).Should(Succeed())
	t.Cleanup(func() { setCRDs(t) })

	g.Eventually(deploymentGone("ratelimit-controller"), eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, ratelimit).Reason).To(Equal(operatorv1alpha1.ReasonCRDVersionNotServed))
	}, eventually).Should(Succeed())
}

func TestSelfHealing(t *testing.T) {
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	createGateway(t)
	original := awaitDeployment(t, "apirule-controller")
	wantImage := original.Spec.Template.Spec.Containers[0].Image

	t.Run("a deleted Deployment is recreated", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Delete(ctx, original)).To(Succeed())
		g.Eventually(func(g Gomega) {
			d := getDeployment(g, "apirule-controller")
			g.Expect(d.UID).NotTo(Equal(original.UID))
		}, eventually).Should(Succeed())
	})

	t.Run("an edited image is reverted, a foreign annotation kept, mid-rollout too", func(t *testing.T) {
		g := NewWithT(t)
		// Half-way through a rollout.
		setRollout(t, "apirule-controller", func(d *appsv1.Deployment) {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		})
		g.Eventually(func() error {
			d := getDeployment(g, "apirule-controller")
			d.Spec.Template.Spec.Containers[0].Image = "evil.example/apirule:latest"
			d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--debug-everything")
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations["team.example/owner"] = "platform"
			d.Labels["team.example/cost-center"] = "42"
			return k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))
		}, eventually).Should(Succeed())

		g.Eventually(func(g Gomega) {
			d := getDeployment(g, "apirule-controller")
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(wantImage))
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--debug-everything"))
			g.Expect(d.Annotations).To(HaveKeyWithValue("team.example/owner", "platform"))
			g.Expect(d.Labels).To(HaveKeyWithValue("team.example/cost-center", "42"))
		}, eventually).Should(Succeed())
	})

	t.Run("scaled by hand is reverted", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			d := getDeployment(g, "apirule-controller")
			d.Spec.Replicas = ptr.To[int32](5)
			return k8sClient.Update(ctx, d, client.FieldOwner("kubectl-scale"))
		}, eventually).Should(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(*getDeployment(g, "apirule-controller").Spec.Replicas).To(BeEquivalentTo(1))
		}, eventually).Should(Succeed())
	})
}

func TestDisableAndScaleToZero(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t)
	awaitDeployment(t, "ratelimit-controller")

	updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.Controllers = []operatorv1alpha1.ControllerSpec{
			{Name: ratelimit, Enabled: ptr.To(false)},
			{Name: apirule, Replicas: ptr.To[int32](0)},
		}
	})
	g.Eventually(deploymentGone("ratelimit-controller"), eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, ratelimit).Phase).To(Equal(operatorv1alpha1.PhaseDisabled))
		g.Expect(*getDeployment(g, "apirule-controller").Spec.Replicas).To(BeEquivalentTo(0))
	}, eventually).Should(Succeed())

	setRollout(t, "apirule-controller", rolledOut)
	setRollout(t, "gateway-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		st := gatewayStatus(g)
		rule := controllerStatus(g, apirule)
		g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseReady))
		g.Expect(rule.Reason).To(Equal(operatorv1alpha1.ReasonScaledToZero))
		g.Expect(controllerStatus(g, gatewayCtl).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
		g.Expect(st.Ready).To(Equal("2/2"), "the disabled controller does not count")
	}, eventually).Should(Succeed())
}

func TestImages(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t)
	image := func(g Gomega, name string) string {
		return getDeployment(g, name).Spec.Template.Spec.Containers[0].Image
	}
	g.Eventually(func(g Gomega) {
		g.Expect(image(g, "apirule-controller")).To(Equal("registry.test/portico/apirule-controller:v9.9.9"), "registry and tag flags")
		g.Expect(image(g, "ratelimit-controller")).To(Equal("mirror.test/ratelimit-controller@sha256:0123"), "RELATED_IMAGE_RATELIMIT_CONTROLLER")
		g.Expect(image(g, "gateway-controller")).To(Equal("registry.test/portico/gateway-controller:v9.9.9"), "registry and tag flags")
	}, eventually).Should(Succeed())

	updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.Controllers = []operatorv1alpha1.ControllerSpec{
			{Name: apirule, Image: "airgap.local/apirule:v1"},
			{Name: ratelimit, Image: "airgap.local/ratelimit:v1"},
			{Name: gatewayCtl, Image: "airgap.local/gateway:v1"},
		}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(image(g, "apirule-controller")).To(Equal("airgap.local/apirule:v1"))
		g.Expect(image(g, "ratelimit-controller")).To(Equal("airgap.local/ratelimit:v1"), "the spec beats RELATED_IMAGE_*")
		g.Expect(image(g, "gateway-controller")).To(Equal("airgap.local/gateway:v1"))
		g.Expect(controllerStatus(g, apirule).Image).To(Equal("airgap.local/apirule:v1"))
		g.Expect(controllerStatus(g, gatewayCtl).Image).To(Equal("airgap.local/gateway:v1"))
	}, eventually).Should(Succeed())
}

func TestReadinessFollowsTheRollout(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t, operatorv1alpha1.ControllerSpec{Name: apirule, Replicas: ptr.To[int32](2)})
	g.Eventually(func(g Gomega) {
		getDeployment(g, "apirule-controller")
		getDeployment(g, "ratelimit-controller")
		getDeployment(g, "gateway-controller")
	}, eventually).Should(Succeed())

	setRollout(t, "apirule-controller", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	})
	g.Eventually(func(g Gomega) {
		rule := controllerStatus(g, apirule)
		g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
		g.Expect(rule.Message).To(ContainSubstring("1 of 2 new replicas have been updated"))
		g.Expect(rule.ReadyReplicas).To(BeEquivalentTo(1))
		g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateProcessing))
	}, eventually).Should(Succeed())

	setRollout(t, "apirule-controller", rolledOut)
	setRollout(t, "ratelimit-controller", rolledOut)
	setRollout(t, "gateway-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		st := gatewayStatus(g)
		g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
		g.Expect(st.Ready).To(Equal("3/3"))
		g.Expect(controllerStatus(g, apirule).Reason).To(Equal(operatorv1alpha1.ReasonRolloutComplete))
		g.Expect(controllerStatus(g, apirule).ReadyReplicas).To(BeEquivalentTo(2))
	}, eventually).Should(Succeed())

	setRollout(t, "ratelimit-controller", func(d *appsv1.Deployment) {
		d.Status.Conditions = []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
			Message: `ReplicaSet "ratelimit-controller-7f" has timed out progressing.`,
		}}
	})
	g.Eventually(func(g Gomega) {
		expectDegraded(g, ratelimit, operatorv1alpha1.ReasonProgressDeadlineExceeded, ContainSubstring("has timed out progressing"))
	}, eventually).Should(Succeed())
}

func TestCrashLoopingPodDegrades(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	createGateway(t)
	awaitDeployment(t, "apirule-controller")
	setRollout(t, "apirule-controller", rolledOut)

	pod := createControllerPod(t, "apirule-controller-6b9f-x2x4k")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "manager", Image: pod.Spec.Containers[0].Image, RestartCount: 6,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container"}},
	}}
	g.Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())

	g.Eventually(func(g Gomega) {
		expectDegraded(g, apirule, operatorv1alpha1.ReasonCrashLoopBackOff,
			ContainSubstring("pod apirule-controller-6b9f-x2x4k container manager is in CrashLoopBackOff"))
	}, eventually).Should(Succeed())
}

func TestDeletingTheGatewayRemovesEveryDeployment(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t)
	g.Eventually(func(g Gomega) {
		getDeployment(g, "apirule-controller")
		getDeployment(g, "ratelimit-controller")
		getDeployment(g, "gateway-controller")
	}, eventually).Should(Succeed())

	deleteGateway(t) // asserts that every Deployment is gone

	for _, name := range allCRDs {
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})).
			To(Succeed(), "the operator never deletes CRDs")
	}
}

func TestOnlyTheDefaultGatewayIsAccepted(t *testing.T) {
	g := NewWithT(t)
	err := k8sClient.Create(context.Background(), &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: "second"}})
	g.Expect(err).To(MatchError(ContainSubstring("must be named 'default'")))
}

func TestIdleClusterSendsNoWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	createGateway(t)
	g.Eventually(func(g Gomega) {
		getDeployment(g, "apirule-controller")
		getDeployment(g, "ratelimit-controller")
		getDeployment(g, "gateway-controller")
	}, eventually).Should(Succeed())
	setRollout(t, "apirule-controller", rolledOut)
	setRollout(t, "ratelimit-controller", rolledOut)
	setRollout(t, "gateway-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
	}, eventually).Should(Succeed())

	versions := func() []string {
		gw := &operatorv1alpha1.APIGateway{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "default"}, gw)).To(Succeed())
		out := []string{gw.ResourceVersion}
		for _, name := range []string{"apirule-controller", "ratelimit-controller", "gateway-controller"} {
			out = append(out, getDeployment(g, name).ResourceVersion)
		}
		return out
	}
	expectIdle(t, versions)
}
