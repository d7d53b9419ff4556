package reconciler_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

var controllerBinaries = []string{"apirule-controller", "ratelimit-controller", "gateway-controller"}

func getPolicy(g Gomega, name string) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, p)).To(Succeed())
	return p
}

func policyGone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &networkingv1.NetworkPolicy{}))
	}
}

// apiServerSlice is the EndpointSlice the API server keeps for Service
// default/kubernetes.
func apiServerSlice(g Gomega) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, s)).To(Succeed())
	return s
}

// egressCIDRs are the ipBlocks of a policy's first egress rule (the API
// server's) and its ports.
func egressCIDRs(p *networkingv1.NetworkPolicy) (cidrs []string, ports []int32) {
	for _, peer := range p.Spec.Egress[0].To {
		cidrs = append(cidrs, peer.IPBlock.CIDR)
	}
	for _, port := range p.Spec.Egress[0].Ports {
		ports = append(ports, port.Port.IntVal)
	}
	return cidrs, ports
}

// wantAPIServer is what the policy must allow of the real API server: the
// addresses and ports of its EndpointSlice and its ClusterIP on 443.
func wantAPIServer(g Gomega) (cidrs []string, ports []int32) {
	slice := apiServerSlice(g)
	for _, ep := range slice.Endpoints {
		for _, a := range ep.Addresses {
			cidrs = append(cidrs, a+"/32")
		}
	}
	cidrs = append(cidrs, apiServerClusterIP.String()+"/32")
	slices.SortFunc(cidrs, func(a, b string) int {
		return netip.MustParsePrefix(a).Addr().Compare(netip.MustParsePrefix(b).Addr())
	})
	ports = []int32{443}
	for _, p := range slice.Ports {
		ports = append(ports, *p.Port)
	}
	slices.Sort(ports)
	return cidrs, slices.Compact(ports)
}

// Every running controller gets a NetworkPolicy that lets its pods reach
// only the API server (the real one's endpoints and ClusterIP, read from
// the cluster) and DNS, and lets nothing in unless the spec names
// namespaces; the operator keeps it (self-healing, drift repair), writes
// nothing once settled, and removes it when the controller stops or
// policies are switched off.
func TestNetworkPolicyPerController(t *testing.T) {
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	gw := createGateway(t)

	var original *networkingv1.NetworkPolicy
	t.Run("on by default: egress to the API server and DNS only, no ingress", func(t *testing.T) {
		g := NewWithT(t)
		wantCIDRs, wantPorts := wantAPIServer(g)
		g.Expect(wantCIDRs).To(HaveLen(2), "envtest's API server has one endpoint, and the ClusterIP")
		for _, name := range controllerBinaries {
			var p *networkingv1.NetworkPolicy
			g.Eventually(func(g Gomega) { p = getPolicy(g, name) }, eventually).Should(Succeed())
			d := awaitDeployment(t, name)
			g.Expect(p.Spec.PodSelector).To(Equal(*d.Spec.Selector), "the policy selects what the Deployment selects")
			g.Expect(p.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
			g.Expect(p.Spec.Ingress).To(BeEmpty(), "nobody may connect")
			g.Expect(p.Spec.Egress).To(HaveLen(2))
			cidrs, ports := egressCIDRs(p)
			g.Expect(cidrs).To(Equal(wantCIDRs))
			g.Expect(ports).To(Equal(wantPorts))
			g.Expect(p.Spec.Egress[1].To).To(BeEmpty(), "DNS to any resolver")
			g.Expect(p.Spec.Egress[1].Ports).To(HaveLen(2))
			owner := metav1.GetControllerOf(p)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.UID).To(Equal(gw.UID))
			if name == "apirule-controller" {
				original = p
			}
		}
	})

	t.Run("a deleted policy comes back", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Delete(ctx, original)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getPolicy(g, "apirule-controller").UID).NotTo(Equal(original.UID))
		}, eventually).Should(Succeed())
	})

	t.Run("a policy opened by hand is closed again, a foreign label kept", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			p := getPolicy(g, "apirule-controller")
			p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{}) // everywhere
			p.Labels["team.example/cost-center"] = "42"
			return k8sClient.Update(ctx, p, client.FieldOwner("kubectl-edit"))
		}, eventually).Should(Succeed())
		g.Eventually(func(g Gomega) {
			p := getPolicy(g, "apirule-controller")
			g.Expect(p.Spec.Egress).To(HaveLen(2))
			g.Expect(p.Labels).To(HaveKeyWithValue("team.example/cost-center", "42"))
		}, eventually).Should(Succeed())
	})

	t.Run("settled, nothing is written", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range controllerBinaries {
			setRollout(t, name, rolledOut)
		}
		g.Eventually(func(g Gomega) {
			g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
		}, eventually).Should(Succeed())
		expectIdle(t, func() []string {
			var versions []string
			for _, name := range controllerBinaries {
				versions = append(versions, getPolicy(g, name).ResourceVersion)
			}
			return versions
		})
	})

	t.Run("named namespaces may reach the metrics port, and only it", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.NetworkPolicies = &operatorv1alpha1.NetworkPoliciesSpec{MetricsFromNamespaces: []string{"monitoring", "kube-prometheus"}}
		})
		g.Eventually(func(g Gomega) {
			for _, name := range controllerBinaries {
				p := getPolicy(g, name)
				g.Expect(p.Spec.Ingress).To(HaveLen(1))
				g.Expect(p.Spec.Ingress[0].Ports).To(HaveLen(1))
				g.Expect(p.Spec.Ingress[0].Ports[0].Port.StrVal).To(Equal("metrics"))
				g.Expect(p.Spec.Ingress[0].From[0].NamespaceSelector.MatchExpressions[0].Values).To(Equal([]string{"kube-prometheus", "monitoring"}))
			}
		}, eventually).Should(Succeed())
	})

	t.Run("a controller that stops loses its policy with its Deployment", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Controllers = []operatorv1alpha1.ControllerSpec{{Name: ratelimit, Enabled: ptr.To(false)}}
		})
		g.Eventually(policyGone("ratelimit-controller"), eventually).Should(BeTrue())
		g.Eventually(deploymentGone("ratelimit-controller"), eventually).Should(BeTrue())
		getPolicy(g, "apirule-controller")
	})

	t.Run("switched off: every policy is removed; on again: back", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.NetworkPolicies = &operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(false)}
		})
		for _, name := range controllerBinaries {
			g.Eventually(policyGone(name), eventually).Should(BeTrue(), name)
		}
		getDeployment(g, "apirule-controller")
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) { gw.Spec.NetworkPolicies = nil })
		g.Eventually(func(g Gomega) { getPolicy(g, "apirule-controller") }, eventually).Should(Succeed())
	})
}

// The policies follow the API server's EndpointSlice as it changes (the
// API server moves, a control-plane node is added), without polling.
func TestNetworkPolicyFollowsTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	createGateway(t)
	g.Eventually(func(g Gomega) { getPolicy(g, "apirule-controller") }, eventually).Should(Succeed())

	// A second control-plane node. The API server's endpoint reconciler
	// puts its own list back within seconds; the operator follows both.
	const added = "10.255.0.9/32"
	g.Eventually(func() error {
		s := apiServerSlice(g)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.255.0.9"}})
		return k8sClient.Update(ctx, s)
	}, eventually).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cidrs, _ := egressCIDRs(getPolicy(g, "apirule-controller"))
		g.Expect(cidrs).To(ContainElement(added))
	}, eventually, 20*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		wantCIDRs, _ := wantAPIServer(g)
		g.Expect(wantCIDRs).NotTo(ContainElement(added), "the API server restored its slice")
		cidrs, _ := egressCIDRs(getPolicy(g, "apirule-controller"))
		g.Expect(cidrs).To(Equal(wantCIDRs))
	}, time.Minute).Should(Succeed())
}

// Attack: a tenant publishes an EndpointSlice that claims to be the API
// server's (labelled for Service kubernetes, named kubernetes) in its own
// namespace, hoping the operator opens the controllers' egress to its
// address. The operator reads only default/kubernetes.
func TestNetworkPolicyIgnoresForeignEndpointSlices(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	createGateway(t)
	for _, ns := range []string{namespace, "default"} {
		name := "kubernetes"
		if ns == "default" {
			name = "kubernetes-evil" // only an administrator could write here; the name still decides
		}
		fake := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"6.6.6.6"}}},
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](443)}},
		}
		g.Expect(k8sClient.Create(ctx, fake)).To(Succeed())
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, fake) })
	}
	g.Eventually(func(g Gomega) { getPolicy(g, "apirule-controller") }, eventually).Should(Succeed())
	g.Consistently(func(g Gomega) {
		wantCIDRs, _ := wantAPIServer(g)
		cidrs, _ := egressCIDRs(getPolicy(g, "apirule-controller"))
		g.Expect(cidrs).To(Equal(wantCIDRs))
		g.Expect(cidrs).NotTo(ContainElement("6.6.6.6/32"))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// A policy that carries the operator's labels but that no APIGateway
// controls (someone else's) is neither deleted nor taken over: the
// controller is Degraded with a message that says why, and gets its own
// policy once that one is gone.
func TestForeignNetworkPolicyIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ratelimit-controller", Namespace: namespace, Labels: map[string]string{
			"app.kubernetes.io/managed-by": operatorv1alpha1.ManagedBy, operatorv1alpha1.LabelController: string(ratelimit),
		}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}},
	}
	g.Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, foreign) })
	createGateway(t)
	awaitDeployment(t, "ratelimit-controller")
	g.Eventually(func(g Gomega) {
		expectDegraded(g, ratelimit, operatorv1alpha1.ReasonDeploymentApplyFailed,
			ContainSubstring("networkpolicy portico-system/ratelimit-controller exists and no APIGateway controls it"))
	}, eventually).Should(Succeed())
	g.Consistently(func(g Gomega) {
		p := getPolicy(g, "ratelimit-controller")
		g.Expect(p.UID).To(Equal(foreign.UID))
		g.Expect(p.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"x": "y"}))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "ratelimit-controller")
		g.Expect(metav1.GetControllerOf(p)).NotTo(BeNil())
	}, eventually).Should(Succeed())
}
