package reconciler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

var (
	gatewayCRDs = []string{"apirules.gateway.portico.dev", "ratelimits.gateway.portico.dev"}
	// allCRDs are the catalog's CRDs the tests install and remove: all but
	// the APIGateway's own, which the environment installs once.
	allCRDs = slices.DeleteFunc(catalog.Builtin.CRDNames(), func(name string) bool { return name == apiGatewayCRD })
)

const apiGatewayCRD = "apigateways.operator.portico.dev"

// crdSettle bounds how long the tests' setup waits for the API server to
// finish deleting (or to establish) a CRD. It is not the operator's budget
// (eventually): the API server's CRD finalizer backs off exponentially when
// it finds the CRD's storage still initializing, which on a loaded machine
// takes longer than the operator ever does.
const crdSettle = 2 * time.Minute

// setCRDs makes exactly the named catalog CRDs installed and Established,
// removing the other catalog CRDs.
func setCRDs(t *testing.T, present ...string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	for _, name := range allCRDs {
		if slices.Contains(present, name) {
			installCRD(t, name)
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			if crd.DeletionTimestamp.IsZero() {
				waitListable(t, crd)
			}
			g.Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, crd))).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, got)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "conditions: %+v", got.Status.Conditions)
		}, crdSettle).Should(Succeed(), "CRD %s should be gone", name)
	}
}

// waitListable waits until the API server lists the CRD's objects, that is
// until their storage is initialized. The API server's finalizer of a CRD
// deleted before that cannot list the objects to delete ("storage is
// (re)initializing") and backs off, which can leave the CRD terminating for
// minutes on a loaded machine.
func waitListable(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Served {
			version = v.Name
			break
		}
	}
	if version == "" {
		return // nothing to list through
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
	NewWithT(t).Eventually(func() error {
		return k8sClient.List(context.Background(), list)
	}, eventually).Should(Succeed(), "list the objects of CRD %s", crd.Name)
}

func installCRD(t *testing.T, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	crd := sourceCRDs[name].DeepCopy()
	err := k8sClient.Create(ctx, crd)
	g.Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "create CRD %s: %v", name, err)
	got := &apiextensionsv1.CustomResourceDefinition{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
		g.Expect(got.DeletionTimestamp).To(BeNil())
		established := false
		for _, c := range got.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		g.Expect(established).To(BeTrue())
	}, crdSettle).Should(Succeed())
	waitListable(t, got)
}

// createGateway creates the APIGateway "default"; cleanup deletes it and
// waits until the operator removed every controller Deployment.
func createGateway(t *testing.T, controllers ...operatorv1alpha1.ControllerSpec) *operatorv1alpha1.APIGateway {
	t.Helper()
	return createGatewayWithSpec(t, operatorv1alpha1.APIGatewaySpec{Controllers: controllers})
}

// createGatewayWithSpec is createGateway with a whole spec.
func createGatewayWithSpec(t *testing.T, spec operatorv1alpha1.APIGatewaySpec) *operatorv1alpha1.APIGateway {
	t.Helper()
	g := NewWithT(t)
	gw := &operatorv1alpha1.APIGateway{
		ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName},
		Spec:       spec,
	}
	g.Expect(k8sClient.Create(context.Background(), gw)).To(Succeed())
	t.Cleanup(func() { deleteGateway(t) })
	return gw
}

func deleteGateway(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
	g.Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, gw))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(gw), gw))
	}, eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		var list appsv1.DeploymentList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, eventually).Should(Succeed(), "the operator removes every Deployment when the APIGateway is gone")
	g.Eventually(func(g Gomega) {
		var list policyv1.PodDisruptionBudgetList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
		for _, b := range list.Items {
			g.Expect(metav1.GetControllerOf(&b)).To(BeNil(), "the operator removes every PodDisruptionBudget it controls: %s", b.Name)
		}
		var policies networkingv1.NetworkPolicyList
		g.Expect(k8sClient.List(ctx, &policies, client.InNamespace(namespace))).To(Succeed())
		for _, p := range policies.Items {
			g.Expect(metav1.GetControllerOf(&p)).To(BeNil(), "the operator removes every NetworkPolicy it controls: %s", p.Name)
		}
	}, eventually).Should(Succeed())
}

func updateGateway(t *testing.T, mutate func(*operatorv1alpha1.APIGateway)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		gw := &operatorv1alpha1.APIGateway{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
			return err
		}
		mutate(gw)
		return k8sClient.Update(context.Background(), gw)
	}, eventually).Should(Succeed())
}

func gatewayStatus(g Gomega) operatorv1alpha1.APIGatewayStatus {
	gw := &operatorv1alpha1.APIGateway{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
	return gw.Status
}

func controllerStatus(g Gomega, name operatorv1alpha1.ControllerName) operatorv1alpha1.ControllerStatus {
	for _, c := range gatewayStatus(g).Controllers {
		if c.Name == name {
			return c
		}
	}
	g.Expect(name).To(BeEmpty(), "controller %s has no status", name)
	return operatorv1alpha1.ControllerStatus{}
}

// expectDegraded expects the controller Degraded for reason with a
// message that matches message, and the APIGateway in error.
func expectDegraded(g Gomega, name operatorv1alpha1.ControllerName, reason string, message gomegatypes.GomegaMatcher) {
	status := controllerStatus(g, name)
	g.Expect(status.Phase).To(Equal(operatorv1alpha1.PhaseDegraded))
	g.Expect(status.Reason).To(Equal(reason))
	g.Expect(status.Message).To(message)
	g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateError))
}

// createControllerPod creates a pod of the apirule controller's Deployment
// (its labels, its manager container) named name, deleted when the test
// ends.
func createControllerPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name": "apirule-controller", "app.kubernetes.io/part-of": "portico",
				"app.kubernetes.io/managed-by": "portico-operator", "operator.portico.dev/controller": "apirule",
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.test/portico/apirule-controller:v9.9.9"}}},
	}
	ctx := context.Background()
	NewWithT(t).Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	return pod
}

// awaitDeployment waits until the operator has created the Deployment, and
// returns it.
func awaitDeployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	NewWithT(t).Eventually(func(g Gomega) { d = getDeployment(g, name) }, eventually).Should(Succeed())
	return d
}

func getDeployment(g Gomega, name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, d)).To(Succeed())
	return d
}

func deploymentGone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &appsv1.Deployment{}))
	}
}

// setRollout writes a Deployment status as kube-controller-manager would.
func setRollout(t *testing.T, name string, mutate func(d *appsv1.Deployment)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		mutate(d)
		return k8sClient.Status().Update(context.Background(), d)
	}, eventually).Should(Succeed())
}

// rolledOut marks the Deployment's current generation as fully available.
func rolledOut(d *appsv1.Deployment) {
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
	}
}

// expectIdle waits for the operator to settle, then checks for 5 s that it
// sends no write and that versions (resourceVersions of the objects it
// manages) stay the same.
func expectIdle(t *testing.T, versions func() []string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() int64 {
		before := operatorWrites.Load()
		time.Sleep(500 * time.Millisecond)
		return operatorWrites.Load() - before
	}, eventually).Should(BeZero(), "the operator settles")
	start, writes := versions(), operatorWrites.Load()
	g.Consistently(func(g Gomega) {
		g.Expect(versions()).To(Equal(start))
		g.Expect(operatorWrites.Load()).To(Equal(writes))
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
}

// gatewayEvents lists the Events about the APIGateway with the given UID.
func gatewayEvents(g Gomega, uid types.UID) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(context.Background(), &list)).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "APIGateway" && e.Regarding.UID == uid {
			out = append(out, e)
		}
	}
	return out
}
