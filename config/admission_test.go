package config

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/test/testenv"
)

// apiruleFinalizer is the apirule controller's finalizer, which the policy
// of config/admission sets (the controller's package is internal to its
// module's tree; the string is the contract between the two).
const apiruleFinalizer = "gateway.portico.dev/apirule-cleanup"

// config/admission, applied for real: while the Deployment
// apirule-controller exists in portico-system, every APIRule the API server
// admits carries the controller's finalizer once; without the Deployment no
// APIRule gets it (nobody would take it off again).
func TestAdmissionPolicyPutsTheFinalizerOnWhileTheControllerIsDeployed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	policy := kustomize(t, "admission")
	g.Expect(policy).To(HaveLen(2))
	for _, u := range policy {
		g.Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("config-test"))).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
	}
	var rules []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, u := range policy {
			_ = k8sClient.Delete(ctx, u)
		}
		// Nobody runs the controller here: let the APIRules go.
		for _, r := range rules {
			_ = k8sClient.Patch(ctx, r, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
			_ = k8sClient.Delete(ctx, r)
		}
	})
	sample, err := testenv.ReadManifests("samples/gateway_v1alpha1_apirule.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	create := func(name string, finalizers ...string) *unstructured.Unstructured {
		u := sample[0].DeepCopy()
		u.SetName(name)
		u.SetFinalizers(finalizers)
		// Right after the CRDs and the policy are installed, the API
		// server's admission may not resolve the kind yet (503 "There can
		// be a delay …"); that passes.
		g.Eventually(func() error {
			return k8sClient.Create(ctx, u)
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		rules = append(rules, u)
		return u
	}

	// No controller Deployment: the policy has no parameter and is skipped.
	// The first APIRules may meet the policy before the API server has
	// loaded it; either way none may carry the finalizer.
	g.Expect(create("without-controller").GetFinalizers()).To(BeEmpty())
	n := 0

	deployment := controllerDeployment("portico-system")
	g.Expect(k8sClient.Create(ctx, deployment)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, deployment) })

	// The API server loads the policy and sees the Deployment shortly.
	g.Eventually(func() []string {
		n++
		return create(fmt.Sprintf("with-controller-%d", n)).GetFinalizers()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(ContainElement(apiruleFinalizer))

	// Every APIRule from then on: once, beside the user's own finalizers.
	g.Expect(create("no-finalizers").GetFinalizers()).To(Equal([]string{apiruleFinalizer}))
	g.Expect(create("own-finalizer", "example.com/keep").GetFinalizers()).To(Equal([]string{"example.com/keep", apiruleFinalizer}))
	g.Expect(create("already-there", apiruleFinalizer).GetFinalizers()).To(Equal([]string{apiruleFinalizer}))

	// Updates are not touched: an APIRule whose finalizer the controller
	// took off (a refused one) keeps it off.
	u := create("updated")
	g.Expect(k8sClient.Patch(ctx, u, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null},"spec":{"timeout":"20s"}}`)))).To(Succeed())
	g.Expect(u.GetFinalizers()).To(BeEmpty())

	// The Deployment gone (the operator retired the controller): no more.
	g.Expect(k8sClient.Delete(ctx, deployment)).To(Succeed())
	g.Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(deployment), &appsv1.Deployment{})
	}).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func() []string {
		n++
		return create(fmt.Sprintf("retired-%d", n)).GetFinalizers()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(BeEmpty())

	// Attack: with the policy loaded and no controller, a tenant names a
	// Deployment of its own namespace like the controller's, to have its
	// APIRules held by a finalizer nobody removes. The parameter is read in
	// the controllers' namespace only.
	decoy := controllerDeployment("shop")
	g.Expect(k8sClient.Create(ctx, decoy)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, decoy) })
	g.Consistently(func() []string {
		n++
		return create(fmt.Sprintf("decoy-%d", n)).GetFinalizers()
	}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(BeEmpty())
}

// controllerDeployment is a Deployment named as the operator names the
// apirule controller's, with no replicas.
func controllerDeployment(namespace string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "apirule-controller", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "apirule-controller"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "apirule-controller"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "apirule-controller"}}},
			},
		},
	}
}
