package charts

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func tcp(port int) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt(port))}
}

func udp(port int) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt(port))}
}

// dnsEgress is the operator's egress to DNS: port 53 anywhere.
var dnsEgress = networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{udp(53), tcp(53)}}

// metricsFrom is an ingress rule from the pods of the named namespaces.
func metricsFrom(ports []networkingv1.NetworkPolicyPort, namespaces ...string) networkingv1.NetworkPolicyIngressRule {
	return networkingv1.NetworkPolicyIngressRule{
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
			}},
		}}},
		Ports: ports,
	}
}

func operatorNetworkPolicy(g Gomega, r *rendered) *networkingv1.NetworkPolicy {
	return get[networkingv1.NetworkPolicy](g, r, "NetworkPolicy", releaseNamespace, operatorName)
}

// TestOperatorNetworkPolicy checks the operator pods' NetworkPolicy: out
// only to the API server and DNS, in only to the metrics and health ports
// from the namespaces networkPolicy.metricsNamespaces names.
func TestOperatorNetworkPolicy(t *testing.T) {
	cases := []struct {
		name        string
		values      string
		wantIngress []networkingv1.NetworkPolicyIngressRule
		wantEgress  []networkingv1.NetworkPolicyEgressRule
	}{{
		name:   "default: no ingress, the API server's ports anywhere and DNS",
		values: "",
		wantEgress: []networkingv1.NetworkPolicyEgressRule{
			{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}},
			dnsEgress,
		},
	}, {
		name:        "metricsNamespaces may reach the metrics and health ports",
		values:      "networkPolicy: {metricsNamespaces: [monitoring, observability]}",
		wantIngress: []networkingv1.NetworkPolicyIngressRule{metricsFrom([]networkingv1.NetworkPolicyPort{tcp(8080), tcp(8081)}, "monitoring", "observability")},
		wantEgress: []networkingv1.NetworkPolicyEgressRule{
			{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}},
			dnsEgress,
		},
	}, {
		name:        "without metrics only the health port",
		values:      "networkPolicy: {metricsNamespaces: [monitoring]}\nmetrics: {enabled: false}",
		wantIngress: []networkingv1.NetworkPolicyIngressRule{metricsFrom([]networkingv1.NetworkPolicyPort{tcp(8081)}, "monitoring")},
		wantEgress: []networkingv1.NetworkPolicyEgressRule{
			{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}},
			dnsEgress,
		},
	}, {
		name:   "apiServer.cidrs and ports restrict egress to the API server",
		values: "networkPolicy: {apiServer: {cidrs: [10.0.0.10/32, 'fd00::1/128'], ports: [8443]}}",
		wantEgress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{tcp(8443)},
			To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.10/32"}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::1/128"}},
			},
		}, dnsEgress},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustRender(t, tc.values)
			policy := operatorNetworkPolicy(g, r)
			g.Expect(policy.Spec.PodSelector.MatchLabels).To(Equal(operatorDeployment(g, r).Spec.Selector.MatchLabels))
			g.Expect(policy.Spec.PodSelector.MatchExpressions).To(BeEmpty())
			g.Expect(policy.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
			g.Expect(policy.Spec.Ingress).To(Equal(tc.wantIngress))
			g.Expect(policy.Spec.Egress).To(Equal(tc.wantEgress))
		})
	}

	t.Run("the ports are the operator container's", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "networkPolicy: {metricsNamespaces: [monitoring]}")
		var containerPorts []networkingv1.NetworkPolicyPort
		for _, p := range managerContainer(g, operatorDeployment(g, r)).Ports {
			containerPorts = append(containerPorts, networkingv1.NetworkPolicyPort{Protocol: ptr.To(p.Protocol), Port: ptr.To(intstr.FromInt32(p.ContainerPort))})
		}
		g.Expect(operatorNetworkPolicy(g, r).Spec.Ingress[0].Ports).To(ConsistOf(containerPorts))
	})

	t.Run("networkPolicy.byOperator renders none and has the operator write it", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "networkPolicy: {byOperator: true, metricsNamespaces: [monitoring, observability], apiServer: {cidrs: [10.0.0.10/32]}}")
		g.Expect(r.ofKind("NetworkPolicy")).To(BeEmpty())
		// operator/internal/cli's TestOwnNetworkPolicyIsTheCharts proves the
		// operator makes the chart's policy of these flags.
		g.Expect(managerContainer(g, operatorDeployment(g, r)).Args).To(ContainElements(
			"--own-network-policy",
			"--own-network-policy-metrics-namespaces=monitoring,observability",
			"--own-network-policy-api-server-cidrs=10.0.0.10/32",
			"--own-network-policy-api-server-ports=443,6443",
		))
		g.Expect(managerContainer(g, operatorDeployment(g, mustRender(t, ""))).Args).NotTo(ContainElement(HavePrefix("--own-network-policy")))
	})

	t.Run("networkPolicy.enabled=false renders none", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "networkPolicy: {enabled: false, metricsNamespaces: [monitoring]}")
		g.Expect(r.ofKind("NetworkPolicy")).To(BeEmpty())
	})
}

// TestAPIGatewayNetworkPolicies checks the APIGateway the chart creates
// turns the controllers' NetworkPolicies on or off like the operator's,
// unless its spec sets networkPolicies itself.
func TestAPIGatewayNetworkPolicies(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   *operatorv1alpha1.NetworkPoliciesSpec
	}{{
		name:   "on by default, no namespace may scrape",
		values: "apiGateway: {create: true}",
		want:   &operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(true)},
	}, {
		name:   "metricsNamespaces become metricsFromNamespaces",
		values: "apiGateway: {create: true}\nnetworkPolicy: {metricsNamespaces: [monitoring]}",
		want:   &operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(true), MetricsFromNamespaces: []string{"monitoring"}},
	}, {
		name:   "networkPolicy.enabled=false turns them off",
		values: "apiGateway: {create: true}\nnetworkPolicy: {enabled: false}",
		want:   &operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(false)},
	}, {
		name: "the user's spec.networkPolicies wins",
		values: "apiGateway: {create: true, spec: {networkPolicies: {metricsFromNamespaces: [prometheus]}}}\n" +
			"networkPolicy: {enabled: false, metricsNamespaces: [monitoring]}",
		want: &operatorv1alpha1.NetworkPoliciesSpec{MetricsFromNamespaces: []string{"prometheus"}},
	}, {
		name:   "the user's empty spec.networkPolicies wins too",
		values: "apiGateway: {create: true, spec: {networkPolicies: {}}}\nnetworkPolicy: {enabled: false}",
		want:   &operatorv1alpha1.NetworkPoliciesSpec{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustRender(t, tc.values, withAPIVersions("operator.portico.dev/v1alpha1/APIGateway"))
			gw := get[operatorv1alpha1.APIGateway](g, r, "APIGateway", "", "default")
			g.Expect(gw.Spec.NetworkPolicies).To(Equal(tc.want))
		})
	}

	t.Run("the rest of the user's spec is kept", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "apiGateway: {create: true, spec: {controllers: [{name: apirule, replicas: 2}]}}",
			withAPIVersions("operator.portico.dev/v1alpha1/APIGateway"))
		gw := get[operatorv1alpha1.APIGateway](g, r, "APIGateway", "", "default")
		g.Expect(gw.Spec.Controllers).To(HaveExactElements(SatisfyAll(
			HaveField("Name", operatorv1alpha1.ControllerAPIRule),
			HaveField("Replicas", HaveValue(BeEquivalentTo(2))),
		)))
		g.Expect(gw.Spec.NetworkPolicies).To(Equal(&operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(true)}))
	})
}
