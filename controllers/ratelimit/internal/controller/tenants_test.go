package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

// The writes are split by RateLimit namespace, the cheapest first, so a
// tenant with one small filter does not wait for another's large one.
func TestTenantsOf(t *testing.T) {
	filter := func(ns, tenant string, patches int) *networkingv1alpha3.EnvoyFilter {
		ef := &networkingv1alpha3.EnvoyFilter{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f-" + tenant, Labels: map[string]string{topology.LabelNamespace: tenant}}}
		for range patches {
			ef.Spec.ConfigPatches = append(ef.Spec.ConfigPatches, &networkingapi.EnvoyFilter_EnvoyConfigObjectPatch{})
		}
		return ef
	}
	limit := func(ns, name string) gatewayv1alpha1.RateLimit {
		return gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	filters := []*networkingv1alpha3.EnvoyFilter{
		filter("istio-system", "team-b", 500), // team-b's pods run in the root namespace
		filter("team-a", "team-a", 3),
		filter("team-c", "team-c", 3),
	}
	limits := []gatewayv1alpha1.RateLimit{limit("team-b", "b1"), limit("team-b", "b2"), limit("team-a", "a1"), limit("team-c", "c1"), limit("team-d", "d1")}
	got := tenantsOf(filters, limits, nil)

	g := NewWithT(t)
	var order []string
	for _, tn := range got {
		order = append(order, namespaceOf(tn))
	}
	g.Expect(order).To(Equal([]string{"team-d", "team-a", "team-c", "team-b"}), "cheapest first, then by name")
	g.Expect(got[3].filters).To(ConsistOf(filters[0]), "a filter goes with the namespace whose RateLimits it holds, wherever it is written")
	g.Expect(got[3].limits).To(HaveLen(2))
	g.Expect(got[0].filters).To(BeEmpty(), "a namespace whose limits need no filter still gets its statuses")
}
