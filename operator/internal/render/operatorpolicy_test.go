package render

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func tcp(port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))}
}

func udp(port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(port))}
}

func scrapersIn(ports []networkingv1.NetworkPolicyPort, namespaces ...string) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: namespaces}},
		}}},
		Ports: ports,
	}}
}

var toDNS = networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{udp(53), tcp(53)}}

func operatorDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-operator", Namespace: "portico-system", UID: "d-1"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
			"app.kubernetes.io/name": "portico-operator", "app.kubernetes.io/instance": "portico",
		}}},
	}
}

// The operator's own policy: the chart's cases (charts.TestOperatorNetworkPolicy)
// and what only flags can give.
func TestOperatorNetworkPolicy(t *testing.T) {
	served := OperatorPolicy{APIServerPorts: []int32{443, 6443}, MetricsPort: 8080, HealthPort: 8081}
	with := func(edit func(*OperatorPolicy)) OperatorPolicy {
		p := served
		edit(&p)
		return p
	}
	tests := map[string]struct {
		policy      OperatorPolicy
		wantIngress []networkingv1.NetworkPolicyIngressRule
		wantEgress  []networkingv1.NetworkPolicyEgressRule
	}{
		"default: no ingress, the API server's ports anywhere and DNS": {
			policy:     served,
			wantEgress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}}, toDNS},
		},
		"metrics namespaces may reach the metrics and health ports, in their order": {
			policy:      with(func(p *OperatorPolicy) { p.MetricsNamespaces = []string{"monitoring", "observability", "monitoring"} }),
			wantIngress: scrapersIn([]networkingv1.NetworkPolicyPort{tcp(8080), tcp(8081)}, "monitoring", "observability"),
			wantEgress:  []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}}, toDNS},
		},
		"without metrics only the health port": {
			policy: with(func(p *OperatorPolicy) {
				p.MetricsNamespaces, p.MetricsPort = []string{"monitoring"}, 0
			}),
			wantIngress: scrapersIn([]networkingv1.NetworkPolicyPort{tcp(8081)}, "monitoring"),
			wantEgress:  []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}}, toDNS},
		},
		"serving nothing: no ingress rule even with metrics namespaces": {
			policy: with(func(p *OperatorPolicy) {
				p.MetricsNamespaces, p.MetricsPort, p.HealthPort = []string{"monitoring"}, 0, 0
			}),
			wantEgress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{tcp(443), tcp(6443)}}, toDNS},
		},
		"API server CIDRs and ports restrict egress to the API server": {
			policy: with(func(p *OperatorPolicy) {
				p.APIServerCIDRs, p.APIServerPorts = []string{"10.0.0.10/32", "fd00::1/128"}, []int32{8443}
			}),
			wantEgress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{tcp(8443)},
				To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.10/32"}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::1/128"}},
				},
			}, toDNS},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			d := operatorDeployment()
			policy := OperatorNetworkPolicy(d, tc.policy)
			g.Expect(policy.Name).To(Equal(d.Name))
			g.Expect(policy.Namespace).To(Equal(d.Namespace))
			g.Expect(policy.Labels).NotTo(HaveKey("app.kubernetes.io/managed-by"),
				"the operator's cache takes objects managed by portico-operator for an APIGateway's")
			g.Expect(policy.OwnerReferences).To(Equal([]metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}), "owned by the Deployment, by UID: the proof that the policy is the operator's")
			g.Expect(policy.Spec.PodSelector).To(Equal(*d.Spec.Selector), "exactly the operator's pods")
			g.Expect(policy.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}))
			g.Expect(policy.Spec.Ingress).To(Equal(tc.wantIngress))
			g.Expect(policy.Spec.Egress).To(Equal(tc.wantEgress))

			d.Spec.Selector.MatchLabels["x"] = "y"
			g.Expect(policy.Spec.PodSelector.MatchLabels).NotTo(HaveKey("x"), "the selector is a copy")
		})
	}
}
