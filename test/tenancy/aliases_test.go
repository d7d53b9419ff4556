package tenancy

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Class 1: a backend must be an ordinary Service of its namespace. Any
// indirection that could land traffic elsewhere (another namespace's pods,
// a host outside the cluster) is refused with BackendNotPermitted, and
// whatever the APIRule had written is removed.
func TestServiceAliasesAreRefused(t *testing.T) {
	create(t, alice, service(teamA, "billing"))
	billingPod := workloadPod(t, teamA, "billing-0", map[string]string{"app": "billing"}, "10.244.1.10")

	attacks := []struct {
		name  string
		alias func(t *testing.T) string // creates the alias in team-b and returns its name
	}{
		{"an ExternalName Service in team-b aliasing team-a's Service", func(t *testing.T) string {
			create(t, bob, service(teamB, "alias-ext", externalName("billing.team-a.svc.cluster.local")))
			return "alias-ext"
		}},
		{"an ExternalName Service in team-b aliasing a host outside the cluster", func(t *testing.T) string {
			create(t, bob, service(teamB, "alias-outside", externalName("payments.partner.example")))
			return "alias-outside"
		}},
		{"a selector-less Service whose EndpointSlice holds team-a's pod IP", func(t *testing.T) string {
			create(t, bob, service(teamB, "alias-manual", withoutSelector()))
			create(t, admin, endpointSlice(teamB, "alias-manual", "alias-manual-1", billingPod))
			return "alias-manual"
		}},
		{"a Service with a selector plus an extra EndpointSlice onto team-a's pod", func(t *testing.T) string {
			create(t, bob, service(teamB, "alias-extra"))
			own := workloadPod(t, teamB, "alias-extra-0", map[string]string{"app": "alias-extra"}, "10.244.2.10")
			create(t, admin, endpointSlice(teamB, "alias-extra", "alias-extra-own", own))
			create(t, admin, endpointSlice(teamB, "alias-extra", "alias-extra-foreign", billingPod))
			return "alias-extra"
		}},
		{"an Istio ServiceEntry in team-b declaring its Service's cluster host", func(t *testing.T) string {
			create(t, bob, service(teamB, "alias-entry"))
			create(t, bob, serviceEntry(teamB, "alias-entry", "alias-entry.team-b.svc.cluster.local", "billing.team-a.svc.cluster.local"))
			return "alias-entry"
		}},
	}
	for i, attack := range attacks {
		t.Run(attack.name, func(t *testing.T) {
			t.Parallel()
			name := attack.alias(t)
			rule := apiRule(teamB, name, fmt.Sprintf("alias-%d.b.example", i), publicGateway, backend("", name), noAuth("/*"))
			create(t, bob, rule)
			expectAliasRefused(t, rule)
		})
	}
	t.Run("a Service that becomes ExternalName after being Applied", func(t *testing.T) {
		t.Parallel()
		svc := service(teamB, "turncoat")
		create(t, bob, svc)
		rule := apiRule(teamB, "turncoat", "turncoat.b.example", publicGateway, backend("", "turncoat"), noAuth("/*"))
		create(t, bob, rule)
		expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
		g := NewWithT(t)
		g.Expect(destinationNamespaces(route(g, publicGateway, "turncoat.b.example", "/"))).To(ConsistOf(teamB))

		update(t, bob, svc, func(s *corev1.Service) { externalName("billing.team-a.svc.cluster.local")(s) })
		expectAliasRefused(t, rule)
	})
}

// expectAliasRefused checks the three guarantees against an alias.
func expectAliasRefused(t *testing.T, rule *gatewayv1alpha1.APIRule) {
	t.Helper()
	host := string(rule.Spec.Hosts[0])
	wait := followUp(t.Run("is refused with BackendNotPermitted", func(t *testing.T) {
		expectRefused(t, rule, gatewayv1alpha1.ReasonBackendNotPermitted)
	}))
	t.Run("no gateway routes its host", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) { expectNotRouted(g, host) }, wait, poll).Should(Succeed())
	})
	t.Run("no Istio object is left for it", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, rule)).To(BeEmpty()) }, wait, poll).Should(Succeed())
	})
}

// endpointSlice is an EndpointSlice of a Service whose endpoints are pods,
// as a tenant with rights on EndpointSlices could write it.
func endpointSlice(ns, svc, name string, pods ...*corev1.Pod) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for _, p := range pods {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		})
	}
	return es
}

// serviceEntry declares host in the mesh, resolved to another address.
func serviceEntry(ns, name, host, address string) *networkingv1.ServiceEntry {
	return &networkingv1.ServiceEntry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingapi.ServiceEntry{
			Hosts:      []string{host},
			Ports:      []*networkingapi.ServicePort{{Number: 8080, Name: "http", Protocol: "HTTP"}},
			Location:   networkingapi.ServiceEntry_MESH_INTERNAL,
			Resolution: networkingapi.ServiceEntry_DNS,
			Endpoints:  []*networkingapi.WorkloadEntry{{Address: address}},
		},
	}
}
