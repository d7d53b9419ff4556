package render

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// OperatorPolicy is what the operator's own NetworkPolicy allows: the
// chart's networkPolicy values (metricsNamespaces, apiServer.cidrs,
// apiServer.ports), which the operator receives as flags, and the ports it
// serves.
type OperatorPolicy struct {
	// MetricsNamespaces may reach the metrics and health ports; none: no
	// pod may.
	MetricsNamespaces []string
	// APIServerCIDRs are where the API server listens; none: any address
	// on APIServerPorts.
	APIServerCIDRs []string
	// APIServerPorts are the API server's ports.
	APIServerPorts []int32
	// MetricsPort and HealthPort are the ports the operator serves its
	// metrics and its probes on; 0 for one it does not serve.
	MetricsPort, HealthPort int32
}

// OperatorNetworkPolicy renders the operator's own NetworkPolicy, the
// same as the chart's templates/operator/networkpolicy.yaml renders from
// the same values: out only to the API server (APIServerPorts, at
// APIServerCIDRs when given, else anywhere) and to DNS (53 anywhere), in
// only to the metrics and health ports from MetricsNamespaces. It is
// named like the operator's Deployment, selects the Deployment's pods (its
// selector) and has the Deployment as its controlling owner: that
// reference, to the Deployment's UID, is how the operator knows the policy
// is its own, and what lets the garbage collector remove it with the
// Deployment.
//
// Unlike the controllers' policies (NetworkPolicy) it does not follow the
// API server's EndpointSlice: a policy that held the operator to addresses
// that then moved would cut off the one process that could repair it.
func OperatorNetworkPolicy(deployment *appsv1.Deployment, p OperatorPolicy) *networkingv1.NetworkPolicy {
	policy := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      deployment.Name,
			Namespace: deployment.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":    deployment.Name,
				"app.kubernetes.io/part-of": operatorv1alpha1.PartOf,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         appsv1.SchemeGroupVersion.String(),
				Kind:               "Deployment",
				Name:               deployment.Name,
				UID:                deployment.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *deployment.Spec.Selector.DeepCopy(),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if namespaces := uniqueInOrder(p.MetricsNamespaces); len(namespaces) > 0 {
		rule := networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: namespaces,
				}},
			}}},
		}
		for _, port := range []int32{p.MetricsPort, p.HealthPort} {
			if port > 0 {
				rule.Ports = append(rule.Ports, policyPort(corev1.ProtocolTCP, port))
			}
		}
		if len(rule.Ports) > 0 {
			policy.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{rule}
		}
	}
	apiServer := networkingv1.NetworkPolicyEgressRule{}
	for _, port := range uniqueInOrder(p.APIServerPorts) {
		apiServer.Ports = append(apiServer.Ports, policyPort(corev1.ProtocolTCP, port))
	}
	for _, cidr := range uniqueInOrder(p.APIServerCIDRs) {
		apiServer.To = append(apiServer.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
	}
	dns := networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
		policyPort(corev1.ProtocolUDP, DNSPort), policyPort(corev1.ProtocolTCP, DNSPort),
	}}
	policy.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{apiServer, dns}
	return policy
}

func policyPort(protocol corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(protocol), Port: ptr.To(intstr.FromInt32(port))}
}

// uniqueInOrder drops repeated values, keeping the first of each: the
// chart's lists keep their order, and the schema refuses repeats there.
func uniqueInOrder[T comparable](in []T) []T {
	var out []T
	for _, v := range in {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
