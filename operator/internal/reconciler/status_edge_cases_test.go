package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// The API server fills defaults into what the operator applies (a fieldRef's
// apiVersion); the owned fields it reads back then never equal what it
// renders. That must neither re-apply on every reconcile nor keep the
// controller Progressing, and a real drift must still be reverted.
func TestServerDefaultedEnvSettlesWithoutWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	createGateway(t, operatorv1alpha1.ControllerSpec{Name: apirule, Env: []corev1.EnvVar{
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
	}})
	g.Eventually(func(g Gomega) {
		env := getDeployment(g, "apirule-controller").Spec.Template.Spec.Containers[0].Env
		g.Expect(env).To(ContainElement(HaveField("Name", "NODE_NAME")))
		getDeployment(g, "ratelimit-controller")
		getDeployment(g, "gateway-controller")
	}, eventually).Should(Succeed())
	setRollout(t, "apirule-controller", rolledOut)
	setRollout(t, "ratelimit-controller", rolledOut)
	setRollout(t, "gateway-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
	}, eventually).Should(Succeed())

	versions := func() []string {
		gw := &operatorv1alpha1.APIGateway{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
		return []string{
			gw.ResourceVersion, getDeployment(g, "apirule-controller").ResourceVersion,
			getDeployment(g, "ratelimit-controller").ResourceVersion, getDeployment(g, "gateway-controller").ResourceVersion,
		}
	}
	expectIdle(t, versions)

	var wantImage string
	g.Eventually(func() error {
		d := getDeployment(g, "apirule-controller")
		wantImage = d.Spec.Template.Spec.Containers[0].Image
		d.Spec.Template.Spec.Containers[0].Image = "evil.example/apirule:latest"
		return k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))
	}, eventually).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getDeployment(g, "apirule-controller").Spec.Template.Spec.Containers[0].Image).To(Equal(wantImage))
	}, eventually).Should(Succeed(), "a drift is still reverted")
	setRollout(t, "apirule-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
	}, eventually).Should(Succeed())
	expectIdle(t, versions)
}

// An API server error can be longer than the status message allows; the
// status must still be written, with the message cut, and the Event too.
func TestOverlongApplyErrorIsReported(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	// A label value is at most 63 characters: the Deployment is rejected
	// with an error that quotes all 5,000 of them.
	gw := createGateway(t, operatorv1alpha1.ControllerSpec{Name: apirule, NodeSelector: map[string]string{
		"topology.example/zone": strings.Repeat("z", 5000),
	}})

	g.Eventually(func(g Gomega) {
		expectDegraded(g, apirule, operatorv1alpha1.ReasonDeploymentApplyFailed, And(
			HavePrefix("apply deployment portico-system/apirule-controller: "),
			HaveSuffix(contract.TruncatedNote),
			WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", contract.ControllerStatusMaxLength)),
		))
	}, eventually).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(gatewayEvents(g, gw.UID)).To(ContainElement(And(
			HaveField("Reason", operatorv1alpha1.ReasonDeploymentApplyFailed),
			HaveField("Note", HaveSuffix(contract.TruncatedNote)))))
	}, eventually).Should(Succeed(), "the Event is recorded, its note cut to the Event limit")
	g.Expect(deploymentGone("apirule-controller")()).To(BeTrue())
}

// Pods that cannot be created show as Degraded within seconds, not as
// Progressing until the progress deadline (ten minutes by default).
func TestReplicaFailureDegradesAtOnce(t *testing.T) {
	g := NewWithT(t)
	setCRDs(t, allCRDs...)
	createGateway(t, operatorv1alpha1.ControllerSpec{Name: ratelimit, Enabled: ptr.To(false)})
	awaitDeployment(t, "apirule-controller")

	const forbidden = `pods "apirule-controller-7d9c5" is forbidden: error looking up service account portico-system/apirule-controller: serviceaccount "apirule-controller" not found`
	setRollout(t, "apirule-controller", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetCreated"},
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
				{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: forbidden},
			},
		}
	})
	g.Eventually(func(g Gomega) {
		expectDegraded(g, apirule, operatorv1alpha1.ReasonReplicaFailure,
			Equal("deployment apirule-controller cannot create pods: FailedCreate: "+forbidden))
	}, 5*time.Second).Should(Succeed())

	// The ServiceAccount is created; the ReplicaSet creates its pods.
	setRollout(t, "apirule-controller", rolledOut)
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseReady))
	}, eventually).Should(Succeed())
}

// A crash-looping container alternates between waiting in CrashLoopBackOff
// and running, not ready, until its next crash. The controller stays
// Degraded through every restart, with one Event. The other controllers are
// disabled: the Events of one APIGateway with the same action and reason form
// one series, whichever controller they are about.
func TestCrashLoopStaysDegradedWithOneEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	gw := createGateway(t,
		operatorv1alpha1.ControllerSpec{Name: ratelimit, Enabled: ptr.To(false)},
		operatorv1alpha1.ControllerSpec{Name: gatewayCtl, Enabled: ptr.To(false)})
	awaitDeployment(t, "apirule-controller")
	setRollout(t, "apirule-controller", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, apirule).Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
	}, eventually).Should(Succeed())

	pod := createControllerPod(t, "apirule-controller-6b9f-c7ash")

	lastCrash := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", StartedAt: metav1.Now(), FinishedAt: metav1.Now(),
	}}
	setContainer := func(restarts int32, state corev1.ContainerState) {
		t.Helper()
		g.Eventually(func() error {
			p := &corev1.Pod{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
				return err
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: "manager", Image: pod.Spec.Containers[0].Image, RestartCount: restarts,
				State: state, LastTerminationState: lastCrash,
			}}
			return k8sClient.Status().Update(ctx, p)
		}, eventually).Should(Succeed())
	}
	backOff := func(d string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CrashLoopBackOff", Message: "back-off " + d + " restarting failed container=manager pod=" + pod.Name,
		}}
	}
	runningAgain := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}

	for i, step := range []struct {
		restarts int32
		state    corev1.ContainerState
		message  string
	}{
		{1, backOff("10s"), "(1 restarts): back-off 10s"},
		{2, runningAgain, "(2 restarts): restarted after exit code 1 (Error) and is not ready"},
		{2, backOff("20s"), "(2 restarts): back-off 20s"},
		{3, runningAgain, "(3 restarts): restarted after exit code 1 (Error) and is not ready"},
		{3, backOff("40s"), "(3 restarts): back-off 40s"},
	} {
		setContainer(step.restarts, step.state)
		g.Eventually(func(g Gomega) {
			rule := controllerStatus(g, apirule)
			g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseDegraded))
			g.Expect(rule.Reason).To(Equal(operatorv1alpha1.ReasonCrashLoopBackOff))
			g.Expect(rule.Message).To(HavePrefix("pod apirule-controller-6b9f-c7ash container manager is in CrashLoopBackOff " + step.message))
		}, eventually).Should(Succeed(), "step %d", i)
	}

	// Every phase was entered once: a repeated transition would show as an
	// Event series (count 2) or a second Event.
	byAction := func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, e := range gatewayEvents(g, gw.UID) {
			if !strings.HasPrefix(e.Note, string(apirule)+" ") {
				continue
			}
			count := 1
			if e.Series != nil {
				count = int(e.Series.Count)
			}
			out[e.Action] += fmt.Sprintf("%s×%d ", e.Reason, count)
		}
		return out
	}
	g.Eventually(byAction, eventually).Should(HaveKey("ControllerDegraded"))
	g.Consistently(byAction, 2*time.Second, 200*time.Millisecond).Should(And(
		HaveKeyWithValue("ControllerProgressing", operatorv1alpha1.ReasonRolloutInProgress+"×1 "),
		HaveKeyWithValue("ControllerDegraded", operatorv1alpha1.ReasonCrashLoopBackOff+"×1 "),
	))
}
