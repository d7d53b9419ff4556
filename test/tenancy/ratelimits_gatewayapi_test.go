package tenancy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Class 4 on Gateway API Gateways: a RateLimit names a Gateway API Gateway
// by name in its own namespace, and binds to the pods Istio runs for it
// there (labelled gateway.networking.k8s.io/gateway-name). team-a tries to
// limit team-b's Gateway API Gateway, on which team-b has a gateway-wide
// limit of its own.
func TestRateLimitsOnGatewayAPIGatewaysAreIsolated(t *testing.T) {
	labels := gatewayNamePodLabels("b-edge")
	workloadPod(t, teamB, "b-edge-istio-0", labels, "")
	create(t, bob, gatewayAPIGateway(teamB, "b-edge"))
	own := gatewayAPILimit(teamB, "b-edge-wide", "b-edge", 10)
	create(t, bob, own)
	filters := expectLimitReason(t, own, gatewayv1alpha1.ReasonEnforced).Status.EnvoyFilters
	t.Run("team-b's own limit is accepted and enforced in team-b", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(filters).To(ConsistOf(HavePrefix(teamB + "/")))
		expectGEP713(g, own, "True/Accepted", "True/Enforced")
	})

	steal := gatewayAPILimit(teamA, "b-edge", "b-edge", 1)
	create(t, alice, steal)
	t.Run("naming team-b's Gateway from team-a finds nothing", func(t *testing.T) {
		live := expectLimitReason(t, steal, gatewayv1alpha1.ReasonTargetNotFound)
		g := NewWithT(t)
		g.Expect(live.Status.EnvoyFilters).To(BeEmpty())
		expectGEP713(g, steal, "False/TargetNotFound", "False/NotEnforced")
	})

	// team-a's own Gateway of the same name: Istio would label its pods
	// alike, but it runs none in team-a.
	create(t, alice, gatewayAPIGateway(teamA, "b-edge"))
	t.Run("a look-alike Gateway in team-a does not reach team-b's pods", func(t *testing.T) {
		live := expectLimitReason(t, steal, gatewayv1alpha1.ReasonNotEnforced)
		g := NewWithT(t)
		g.Expect(live.Status.EnvoyFilters).To(BeEmpty())
		expectGEP713(g, steal, "True/Accepted", "False/NotEnforced")
	})

	// team-a's APIRule in HTTPRoute mode on team-b's Gateway, and a route
	// limit on it: team-b's gateway-wide limit, of the namespace where the
	// pods run, decides first.
	create(t, alice, service(teamA, "b-rider"))
	rider := apiRule(teamA, "b-rider", "b-rider.a.example", "", backend("", "b-rider"), noAuth("/*"))
	rider.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Namespace: teamB, Name: "b-edge"}
	create(t, alice, rider)
	routes := rateLimit(teamA, "b-rider", gatewayv1alpha1.TargetAPIRule, "b-rider", 1)
	create(t, alice, routes)
	t.Run("team-a's route limit on team-b's Gateway yields to team-b's limit", func(t *testing.T) {
		live := expectLimitReason(t, routes, gatewayv1alpha1.ReasonConflicted)
		g := NewWithT(t)
		g.Expect(live.Status.EnvoyFilters).To(BeEmpty())
		_, c := limitOf(g, client.ObjectKeyFromObject(routes))
		g.Expect(c.Message).NotTo(ContainSubstring("b-edge-wide"), "another tenant's RateLimit is not named")
	})

	wait := followUp(t.Run("team-b's limit stays Enforced", func(t *testing.T) {
		NewWithT(t).Consistently(func(g Gomega) {
			got, c := limitOf(g, client.ObjectKeyFromObject(own))
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), c.Message)
			g.Expect(got.Status.EnvoyFilters).To(Equal(filters), "the filter stays where it was")
		}, 3*time.Second, poll).Should(Succeed())
	}))
	t.Run("team-b's EnvoyFilter keeps team-b's bucket", func(t *testing.T) {
		expectBuckets(t, filters, []string{""}, 10, wait)
	})
	t.Run("no filter of team-a selects team-b's Gateway pods", func(t *testing.T) {
		g := NewWithT(t)
		for _, ef := range managedFilters(g) {
			if ef.Spec.GetWorkloadSelector().GetLabels()[gatewayv1alpha1.GatewayNameLabel] == "b-edge" {
				g.Expect(ef.Labels).To(HaveKeyWithValue("gateway.portico.dev/ratelimit-namespace", teamB), "EnvoyFilter %s/%s", ef.Namespace, ef.Name)
				g.Expect(ef.Namespace).To(Equal(teamB))
			}
		}
	})
	t.Run("every EnvoyFilter holds one tenant's limits", func(t *testing.T) { expectFiltersIsolated(NewWithT(t)) })
}

// gatewayAPIGateway is a Gateway API Gateway of class istio with an HTTP
// listener.
func gatewayAPIGateway(ns, name string) *gatewayapiv1.Gateway {
	return &gatewayapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayapiv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gatewayapiv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayapiv1.HTTPProtocolType},
		}},
	}
}

// gatewayNamePodLabels are the labels Istio gives the pods of the Gateway
// API Gateway name.
func gatewayNamePodLabels(name string) map[string]string {
	return map[string]string{
		gatewayv1alpha1.GatewayNameLabel:               name,
		"gateway.networking.k8s.io/gateway-class-name": "istio",
		"gateway.istio.io/managed":                     "istio.io-gateway-controller",
	}
}

func gatewayAPILimit(ns, name, gateway string, maxTokens int64) *gatewayv1alpha1.RateLimit {
	l := rateLimit(ns, name, gatewayv1alpha1.TargetGateway, gateway, maxTokens)
	l.Spec.TargetRef.Group = gatewayv1alpha1.GatewayAPIGroup
	return l
}

// expectGEP713 checks a RateLimit's Accepted and Enforced conditions, as
// status/reason.
func expectGEP713(g Gomega, limit *gatewayv1alpha1.RateLimit, accepted, enforced string) {
	l := &gatewayv1alpha1.RateLimit{}
	g.Expect(admin.Get(context.Background(), client.ObjectKeyFromObject(limit), l)).To(Succeed())
	got := map[string]string{}
	for _, t := range []string{gatewayv1alpha1.ConditionAccepted, gatewayv1alpha1.ConditionEnforced} {
		if c := meta.FindStatusCondition(l.Status.Conditions, t); c != nil {
			got[t] = string(c.Status) + "/" + c.Reason
		}
	}
	g.Expect(got).To(Equal(map[string]string{gatewayv1alpha1.ConditionAccepted: accepted, gatewayv1alpha1.ConditionEnforced: enforced}))
}
