package render

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func TestNetworkPolicy(t *testing.T) {
	two := APIServer{
		Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")},
		Ports:     []int32{6443},
		ClusterIP: netip.MustParseAddr("10.96.0.1"),
	}
	tests := map[string]struct {
		api         APIServer
		metricsFrom []string
		wantNone    bool
		wantCIDRs   []string
		wantPorts   []int32
		wantFrom    []string
	}{
		"no endpoints known: none":         {api: APIServer{ClusterIP: netip.MustParseAddr("10.96.0.1")}, wantNone: true},
		"endpoints without ports: none":    {api: APIServer{Addresses: two.Addresses}, wantNone: true},
		"endpoints and clusterIP, deduped": {api: two, wantCIDRs: []string{"10.0.0.1/32", "10.0.0.2/32", "10.96.0.1/32"}, wantPorts: []int32{443, 6443}},
		"no clusterIP: endpoints only": {
			api:       APIServer{Addresses: []netip.Addr{netip.MustParseAddr("fd00::1")}, Ports: []int32{443}},
			wantCIDRs: []string{"fd00::1/128"}, wantPorts: []int32{443},
		},
		"scraping namespaces sorted and deduped": {
			api: two, metricsFrom: []string{"monitoring", "kube-prometheus", "monitoring"},
			wantCIDRs: []string{"10.0.0.1/32", "10.0.0.2/32", "10.96.0.1/32"}, wantPorts: []int32{443, 6443},
			wantFrom: []string{"kube-prometheus", "monitoring"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			np := NetworkPolicy(input(operatorv1alpha1.ControllerSpec{}), tc.api, tc.metricsFrom)
			if tc.wantNone {
				g.Expect(np).To(BeNil())
				return
			}
			g.Expect(np).NotTo(BeNil())
			g.Expect(*np.Name).To(Equal(apirule.Binary()))
			g.Expect(*np.Namespace).To(Equal("portico-system"))
			g.Expect(np.Labels).To(Equal(Labels(operatorv1alpha1.ControllerAPIRule)))
			g.Expect(np.OwnerReferences).To(HaveLen(1))
			g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(SelectorLabels(operatorv1alpha1.ControllerAPIRule)))
			g.Expect(np.Spec.PolicyTypes).To(HaveLen(2))
			g.Expect(np.Spec.Egress).To(HaveLen(2))

			var cidrs []string
			for _, peer := range np.Spec.Egress[0].To {
				cidrs = append(cidrs, *peer.IPBlock.CIDR)
			}
			g.Expect(cidrs).To(Equal(tc.wantCIDRs))
			var ports []int32
			for _, p := range np.Spec.Egress[0].Ports {
				g.Expect(*p.Protocol).To(Equal(corev1.ProtocolTCP))
				ports = append(ports, p.Port.IntVal)
			}
			g.Expect(ports).To(Equal(tc.wantPorts))

			dns := np.Spec.Egress[1]
			g.Expect(dns.To).To(BeEmpty(), "DNS to any destination")
			g.Expect(dns.Ports).To(HaveLen(2))
			g.Expect(*dns.Ports[0].Protocol).To(Equal(corev1.ProtocolUDP))
			g.Expect(*dns.Ports[1].Protocol).To(Equal(corev1.ProtocolTCP))
			g.Expect(*dns.Ports[0].Port).To(Equal(intstr.FromInt32(DNSPort)))

			if tc.wantFrom == nil {
				g.Expect(np.Spec.Ingress).To(BeEmpty(), "nobody may scrape")
				return
			}
			g.Expect(np.Spec.Ingress).To(HaveLen(1))
			in := np.Spec.Ingress[0]
			g.Expect(in.Ports).To(HaveLen(1))
			g.Expect(*in.Ports[0].Port).To(Equal(intstr.FromString("metrics")), "the metrics port only, not the health port")
			g.Expect(in.From).To(HaveLen(1))
			g.Expect(in.From[0].PodSelector).To(BeNil())
			req := in.From[0].NamespaceSelector.MatchExpressions[0]
			g.Expect(*req.Key).To(Equal(NamespaceNameLabel))
			g.Expect(req.Values).To(Equal(tc.wantFrom))
		})
	}
}

func TestAPIServerOf(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(p int32, proto *corev1.Protocol) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Port: &p, Protocol: proto}
	}
	endpoint := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	clusterIP := netip.MustParseAddr("10.96.0.1")
	tests := map[string]struct {
		slices    []discoveryv1.EndpointSlice
		wantAddrs []string
		wantPorts []int32
	}{
		"none": {},
		"one slice, two endpoints, sorted": {
			slices: []discoveryv1.EndpointSlice{{
				Endpoints: []discoveryv1.Endpoint{endpoint(nil, "10.0.0.2"), endpoint(ptr.To(true), "10.0.0.1")},
				Ports:     []discoveryv1.EndpointPort{port(6443, &tcp)},
			}},
			wantAddrs: []string{"10.0.0.1", "10.0.0.2"}, wantPorts: []int32{6443},
		},
		"unready endpoints and UDP ports are left out": {
			slices: []discoveryv1.EndpointSlice{{
				Endpoints: []discoveryv1.Endpoint{endpoint(ptr.To(false), "10.0.0.9"), endpoint(nil, "10.0.0.1")},
				Ports:     []discoveryv1.EndpointPort{port(53, &udp), port(443, nil)},
			}},
			wantAddrs: []string{"10.0.0.1"}, wantPorts: []int32{443},
		},
		"unparsable addresses are skipped, IPv4-mapped ones unmapped": {
			slices: []discoveryv1.EndpointSlice{{
				Endpoints: []discoveryv1.Endpoint{endpoint(nil, "not-an-ip", "::ffff:10.0.0.3")},
				Ports:     []discoveryv1.EndpointPort{port(6443, &tcp)},
			}},
			wantAddrs: []string{"10.0.0.3"}, wantPorts: []int32{6443},
		},
		"a slice without ports or addresses contributes nothing": {
			slices: []discoveryv1.EndpointSlice{
				{Endpoints: []discoveryv1.Endpoint{endpoint(nil, "10.0.0.7")}},
				{Ports: []discoveryv1.EndpointPort{port(8443, &tcp)}},
				{Endpoints: []discoveryv1.Endpoint{endpoint(nil, "fd00::1")}, Ports: []discoveryv1.EndpointPort{port(6443, &tcp)}},
			},
			wantAddrs: []string{"fd00::1"}, wantPorts: []int32{6443},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			api := APIServerOf(tc.slices, clusterIP)
			g.Expect(api.ClusterIP).To(Equal(clusterIP))
			var addrs []string
			for _, a := range api.Addresses {
				addrs = append(addrs, a.String())
			}
			g.Expect(addrs).To(Equal(tc.wantAddrs))
			g.Expect(api.Ports).To(Equal(tc.wantPorts))
			g.Expect(api.Known()).To(Equal(len(tc.wantAddrs) > 0))
		})
	}
}
