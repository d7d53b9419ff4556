package render

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
)

// NamespaceNameLabel is the label the API server sets on every namespace
// to its name; ingress rules select scraping namespaces by it.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// The names of a controller container's ports.
const (
	MetricsPortName = "metrics"
	HealthPortName  = "health"
)

// DNSPort is where pods resolve names; any destination, since node-local
// caches run on the host network.
const DNSPort = 53

// APIServer is where a controller reaches the API server: the endpoint
// addresses and ports of Service default/kubernetes's EndpointSlices, and
// the Service's ClusterIP (443) for CNIs that match before DNAT.
type APIServer struct {
	Addresses []netip.Addr
	Ports     []int32
	ClusterIP netip.Addr
}

// Known reports whether any endpoint of the API server is known; without
// one, a policy would cut the controller off.
func (a APIServer) Known() bool {
	return len(a.Addresses) > 0 && len(a.Ports) > 0
}

// NetworkPolicy renders the controller's NetworkPolicy, named like its
// Deployment and selecting exactly its pods: egress only to the API server
// and DNS, ingress only to the metrics port from pods in the named
// namespaces (none: nobody may connect). The rate-limit service may also
// reach Redis (its address's port, any destination) and accept its gRPC
// port from any pod (globalRateLimitIngress). The kubelet's probes of the health
// port come from the node, which enforcing CNIs allow without a rule. Nil
// when no API server endpoint is known.
func NetworkPolicy(in Input, api APIServer, metricsFrom []string) *networkingv1ac.NetworkPolicyApplyConfiguration {
	if !api.Known() {
		return nil
	}
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(in.Entry.Name))).
		WithPolicyTypes("Ingress", "Egress").
		WithEgress(apiServerEgress(api), dnsEgress()).
		WithEgress(globalRateLimitEgress(in)...).
		WithIngress(globalRateLimitIngress(in)...)
	if len(metricsFrom) > 0 {
		spec.WithIngress(networkingv1ac.NetworkPolicyIngressRule().
			WithPorts(port(corev1.ProtocolTCP, intstr.FromString(MetricsPortName))).
			WithFrom(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(
				metav1ac.LabelSelector().WithMatchExpressions(metav1ac.LabelSelectorRequirement().
					WithKey(NamespaceNameLabel).WithOperator("In").WithValues(sorted(metricsFrom)...)))))
	}
	return networkingv1ac.NetworkPolicy(in.Entry.Binary(), in.Namespace).
		WithLabels(Labels(in.Entry.Name)).
		WithOwnerReferences(ownerReference(in.Owner)).
		WithSpec(spec)
}

// apiServerEgress allows each endpoint address (a /32 or /128) on the
// endpoints' ports, and the ClusterIP on 443.
func apiServerEgress(api APIServer) *networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	addrs := slices.Clone(api.Addresses)
	if api.ClusterIP.IsValid() {
		addrs = append(addrs, api.ClusterIP)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	addrs = slices.Compact(addrs)
	ports := slices.Clone(api.Ports)
	if api.ClusterIP.IsValid() {
		ports = append(ports, 443)
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	rule := networkingv1ac.NetworkPolicyEgressRule()
	for _, a := range addrs {
		rule.WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(
			networkingv1ac.IPBlock().WithCIDR(netip.PrefixFrom(a, a.BitLen()).String())))
	}
	for _, p := range ports {
		rule.WithPorts(port(corev1.ProtocolTCP, intstr.FromInt32(p)))
	}
	return rule
}

// dnsEgress allows port 53 over UDP and TCP to any destination.
func dnsEgress() *networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	return networkingv1ac.NetworkPolicyEgressRule().WithPorts(
		port(corev1.ProtocolUDP, intstr.FromInt32(DNSPort)),
		port(corev1.ProtocolTCP, intstr.FromInt32(DNSPort)))
}

func port(proto corev1.Protocol, p intstr.IntOrString) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
	return networkingv1ac.NetworkPolicyPort().WithProtocol(proto).WithPort(p)
}

// APIServerOf reads where the API server listens from the EndpointSlices of
// Service default/kubernetes: the addresses of its endpoints that are not
// known to be unready, and the TCP ports. clusterIP is the Service's
// (KUBERNETES_SERVICE_HOST in a pod), or the zero Addr.
func APIServerOf(endpointSlices []discoveryv1.EndpointSlice, clusterIP netip.Addr) APIServer {
	api := APIServer{ClusterIP: clusterIP}
	for _, slice := range endpointSlices {
		var addrs []netip.Addr
		for _, ep := range slice.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if addr, err := netip.ParseAddr(a); err == nil {
					addrs = append(addrs, addr.Unmap())
				}
			}
		}
		var ports []int32
		for _, p := range slice.Ports {
			if p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
				ports = append(ports, *p.Port)
			}
		}
		if len(addrs) > 0 && len(ports) > 0 { // a slice's addresses serve only its own ports
			api.Addresses = append(api.Addresses, addrs...)
			api.Ports = append(api.Ports, ports...)
		}
	}
	slices.SortFunc(api.Addresses, func(a, b netip.Addr) int { return a.Compare(b) })
	api.Addresses = slices.Compact(api.Addresses)
	slices.Sort(api.Ports)
	api.Ports = slices.Compact(api.Ports)
	return api
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
