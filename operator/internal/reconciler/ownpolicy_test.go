package reconciler_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/portico-dev/portico/operator/internal/reconciler"
	"github.com/portico-dev/portico/operator/internal/render"
)

const operatorDeploymentName = "portico-operator"

// ownPolicy is what the operator's flags say in these tests: the chart's
// defaults and one scraping namespace.
var ownPolicy = render.OperatorPolicy{
	MetricsNamespaces: []string{"monitoring"}, APIServerPorts: []int32{443, 6443}, MetricsPort: 8080, HealthPort: 8081,
}

// startOwnPolicy runs the operator's own-NetworkPolicy reconciler for
// namespace ns in a manager of its own, as `--own-network-policy` does,
// until the test ends.
func startOwnPolicy(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(testCfg, ctrl.Options{
		Scheme:                 k8sClient.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	own := &reconciler.OwnNetworkPolicy{
		Client: mgr.GetClient(), Namespace: ns, Deployment: operatorDeploymentName, Policy: ownPolicy,
		Recorder: mgr.GetEventRecorder("portico-operator"),
	}
	g.Expect(own.SetupWithManager(mgr)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
}

// createOperatorDeployment creates the operator's Deployment as the chart
// and the OLM bundle do (its pods never run here).
func createOperatorDeployment(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	selector := map[string]string{"app.kubernetes.io/name": operatorDeploymentName, "app.kubernetes.io/instance": "portico"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: operatorDeploymentName, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "olm"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.test/portico-operator:v9.9.9"}}},
			},
		},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), d)).To(Succeed())
	return d
}

func getOwnPolicy(g Gomega, ns string) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: operatorDeploymentName}, p)).To(Succeed())
	return p
}

// ownedBy checks the policy is the operator's, as the chart would render
// it: controlled by the Deployment (by UID), and the rendered spec.
func ownedBy(g Gomega, p *networkingv1.NetworkPolicy, d *appsv1.Deployment) {
	g.Expect(metav1.IsControlledBy(p, d)).To(BeTrue(), "the policy is not controlled by the operator's Deployment")
	g.Expect(p.Spec).To(Equal(render.OperatorNetworkPolicy(d, ownPolicy).Spec))
}

// With --own-network-policy the operator writes its own NetworkPolicy,
// the chart's, owned by its Deployment; it takes back an edit, writes it
// again after a deletion, and writes nothing once it is in place.
func TestOwnNetworkPolicy(t *testing.T) {
	const ns = "own-policy"
	newNamespace(t, ns)
	d := createOperatorDeployment(t, ns)
	startOwnPolicy(t, ns)
	ctx := context.Background()

	var first *networkingv1.NetworkPolicy
	NewWithT(t).Eventually(func(g Gomega) {
		first = getOwnPolicy(g, ns)
		ownedBy(g, first, d)
	}, eventually).Should(Succeed())

	t.Run("writes nothing once in place", func(t *testing.T) {
		NewWithT(t).Consistently(func(g Gomega) {
			g.Expect(getOwnPolicy(g, ns).ResourceVersion).To(Equal(first.ResourceVersion))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	t.Run("an edit is taken back", func(t *testing.T) {
		g := NewWithT(t)
		edited := getOwnPolicy(g, ns)
		edited.Spec.Egress = append(edited.Spec.Egress, networkingv1.NetworkPolicyEgressRule{}) // everywhere
		edited.Spec.Ingress = append(edited.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		g.Expect(k8sClient.Update(ctx, edited)).To(Succeed())
		NewWithT(t).Eventually(func(g Gomega) {
			p := getOwnPolicy(g, ns)
			g.Expect(p.ResourceVersion).NotTo(Equal(edited.ResourceVersion))
			ownedBy(g, p, d)
		}, eventually).Should(Succeed())
	})

	t.Run("a deleted policy is written again", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Delete(ctx, getOwnPolicy(g, ns))).To(Succeed())
		NewWithT(t).Eventually(func(g Gomega) {
			p := getOwnPolicy(g, ns)
			g.Expect(p.UID).NotTo(Equal(first.UID))
			ownedBy(g, p, d)
		}, eventually).Should(Succeed())
	})
}

// ownPolicyRefusals are the Warning Events the operator recorded on its
// Deployment for a policy it did not write.
func ownPolicyRefusals(g Gomega, d *appsv1.Deployment) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(d.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reconciler.ReasonNetworkPolicyNotOwned && e.Regarding.UID == d.UID {
			out = append(out, e)
		}
	}
	return out
}

// Attack: someone who may write NetworkPolicies in the operator's
// namespace creates one named like the operator's before the operator
// writes its own (an open policy, say, that lets the operator's pods, and
// their token, reach anything). An object is the operator's only if the
// operator wrote it: the policy must be controlled by the operator's
// Deployment, by UID. Labels, a reference to the Deployment's name with
// another UID, or a reference to the right UID that is not a controller
// reference prove nothing. The operator must leave the policy exactly as
// it is (no update, no adoption, no deletion), record a Warning Event
// NetworkPolicyNotOwned on its Deployment, and write its own once the
// other is gone. Without the ownership check the operator updates the
// foreign policy into its own and adopts it (this test then fails).
func TestOwnNetworkPolicyIsNeverTakenOver(t *testing.T) {
	cases := map[string]func(d *appsv1.Deployment) []metav1.OwnerReference{
		"no owner, the operator's labels": func(*appsv1.Deployment) []metav1.OwnerReference { return nil },
		"controlled by a Deployment of the same name, another UID": func(d *appsv1.Deployment) []metav1.OwnerReference {
			return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: types.UID("forged-uid"), Controller: ptr.To(true)}}
		},
		"owned by the Deployment's UID but not as its controller": func(d *appsv1.Deployment) []metav1.OwnerReference {
			return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}}
		},
	}
	i := 0
	for name, owners := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := "own-policy-attack-" + string(rune('a'+i-1))
			newNamespace(t, ns)
			d := createOperatorDeployment(t, ns)
			foreign := &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{
					Name: operatorDeploymentName, Namespace: ns,
					Labels:          map[string]string{"app.kubernetes.io/name": operatorDeploymentName, "app.kubernetes.io/part-of": "portico", "app.kubernetes.io/managed-by": "portico-operator"},
					OwnerReferences: owners(d),
				},
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: *d.Spec.Selector,
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
					Egress:      []networkingv1.NetworkPolicyEgressRule{{}}, // anywhere
				},
			}
			g.Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
			startOwnPolicy(t, ns)

			NewWithT(t).Consistently(func(g Gomega) {
				p := getOwnPolicy(g, ns)
				g.Expect(p.UID).To(Equal(foreign.UID))
				g.Expect(p.ResourceVersion).To(Equal(foreign.ResourceVersion), "the operator changed a policy it did not write")
				g.Expect(p.Spec).To(Equal(foreign.Spec))
				g.Expect(p.OwnerReferences).To(Equal(foreign.OwnerReferences))
			}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(ownPolicyRefusals(g, d)).To(HaveLen(1), "one Event per foreign policy")
			}, eventually).Should(Succeed(), "no Warning Event %s on the operator's Deployment", reconciler.ReasonNetworkPolicyNotOwned)
			NewWithT(t).Consistently(func(g Gomega) {
				g.Expect(ownPolicyRefusals(g, d)).To(HaveLen(1), "one Event per foreign policy")
			}, time.Second, 250*time.Millisecond).Should(Succeed())
			refusal := ownPolicyRefusals(g, d)[0]
			g.Expect(refusal.Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(refusal.Note).To(And(ContainSubstring("did not create it"), ContainSubstring("delete it")))

			g.Expect(k8sClient.Delete(ctx, foreign)).To(Succeed())
			NewWithT(t).Eventually(func(g Gomega) {
				p := getOwnPolicy(g, ns)
				g.Expect(p.UID).NotTo(Equal(foreign.UID))
				ownedBy(g, p, d)
			}, eventually).Should(Succeed(), "the operator did not write its own policy once the other was gone")
		})
	}
	t.Run("no Deployment: nothing is written", func(t *testing.T) {
		const ns = "own-policy-no-deployment"
		newNamespace(t, ns)
		startOwnPolicy(t, ns)
		NewWithT(t).Consistently(func() bool {
			err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: operatorDeploymentName}, &networkingv1.NetworkPolicy{})
			return apierrors.IsNotFound(err)
		}, 2*time.Second, 250*time.Millisecond).Should(BeTrue())
	})
}
