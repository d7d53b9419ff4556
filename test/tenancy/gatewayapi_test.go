package tenancy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/explain"
)

// sharedGatewayAPIGateway is the administrator's Gateway API Gateway in the
// root namespace, open to routes of every namespace.
const sharedGatewayAPIGateway = "shared"

// onGatewayAPI puts an APIRule on the shared Gateway API Gateway (HTTPRoute
// mode).
func onGatewayAPI(rule *gatewayv1alpha1.APIRule) *gatewayv1alpha1.APIRule {
	rule.Spec.Gateway = ""
	rule.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Namespace: rootNamespace, Name: sharedGatewayAPIGateway}
	return rule
}

// ensureSharedGateway creates the shared Gateway API Gateway once.
func ensureSharedGateway(t *testing.T) {
	t.Helper()
	gw := &gatewayapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: sharedGatewayAPIGateway},
		Spec: gatewayapiv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gatewayapiv1.Listener{{
			Name: "http", Port: 80, Protocol: gatewayapiv1.HTTPProtocolType,
			AllowedRoutes: &gatewayapiv1.AllowedRoutes{Namespaces: &gatewayapiv1.RouteNamespaces{From: ptr.To(gatewayapiv1.NamespacesFromAll)}},
		}}},
	}
	if err := admin.Create(context.Background(), gw); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// referenceGrant lets HTTPRoutes of namespace from route to a Service of ns.
func referenceGrant(ns, name, from, service string) *gatewayapiv1beta1.ReferenceGrant {
	return &gatewayapiv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayapiv1beta1.ReferenceGrantSpec{
			From: []gatewayapiv1beta1.ReferenceGrantFrom{{Group: gatewayapiv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayapiv1.Namespace(from)}},
			To:   []gatewayapiv1beta1.ReferenceGrantTo{{Kind: "Service", Name: ptr.To(gatewayapiv1.ObjectName(service))}},
		},
	}
}

// HTTPRoute mode keeps the guarantees of the threat model: consent across
// namespaces is a ReferenceGrant of the Service's namespace, hosts have one
// owner whichever mode claims them, and another's HTTPRoute on a host is
// reported without naming what belongs to another namespace.
func TestGatewayAPIMode(t *testing.T) {
	ensureSharedGateway(t)
	t.Run("team-b routing to team-a's Service that consents by annotation only", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "gw-ledger-1", consentingTo(teamB)))
		rule := onGatewayAPI(apiRule(teamB, "gw-ledger-1", "gw-ledger-1.b.example", "", backend(teamA, "gw-ledger-1"), noAuth("/*")))
		create(t, bob, rule)
		// The message is the same whether or not the Service exists.
		expectRefused(t, rule, gatewayv1alpha1.ReasonReferenceNotPermitted)
		NewWithT(t).Consistently(func(g Gomega) { g.Expect(writtenFor(g, rule)).To(BeEmpty()) }, "2s", poll).Should(Succeed())
	})
	t.Run("a ReferenceGrant of team-a for another namespace's routes does not let team-b in", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "gw-ledger-2"))
		create(t, alice, referenceGrant(teamA, "gw-ledger-2-grant", "team-c", "gw-ledger-2"))
		rule := onGatewayAPI(apiRule(teamB, "gw-ledger-2", "gw-ledger-2.b.example", "", backend(teamA, "gw-ledger-2"), noAuth("/*")))
		create(t, bob, rule)
		expectRefused(t, rule, gatewayv1alpha1.ReasonReferenceNotPermitted)
		NewWithT(t).Consistently(func(g Gomega) { g.Expect(writtenFor(g, rule)).To(BeEmpty()) }, "2s", poll).Should(Succeed())
	})
	t.Run("team-a withdrawing its ReferenceGrant", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "gw-ledger-3"))
		grant := referenceGrant(teamA, "gw-ledger-3-grant", teamB, "gw-ledger-3")
		create(t, alice, grant)
		rule := onGatewayAPI(apiRule(teamB, "gw-ledger-3", "gw-ledger-3.b.example", "", backend(teamA, "gw-ledger-3"), noAuth("/health")))
		create(t, bob, rule)
		// No Gateway controller runs here: the route waits for its answer.
		expectReason(t, rule, gatewayv1alpha1.ReasonRoutePending)
		g := NewWithT(t)
		g.Expect(writtenFor(g, rule)).To(ConsistOf("HTTPRoute "+teamB+"/gw-ledger-3"), "routes only: no policy in team-a")
		g.Expect(alice.Delete(context.Background(), grant)).To(Succeed())
		expectRefused(t, rule, gatewayv1alpha1.ReasonReferenceNotPermitted)
		g.Eventually(func(g Gomega) { g.Expect(writtenFor(g, rule)).To(BeEmpty()) }, eventually, poll).Should(Succeed())
	})
	t.Run("team-b claiming in HTTPRoute mode a host team-a owns in Istio mode", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "gw-owner"))
		owner := apiRule(teamA, "gw-owner", "gw-owner.shared.example", publicGateway, backend("", "gw-owner"), noAuth("/health"))
		create(t, alice, owner)
		expectReason(t, owner, gatewayv1alpha1.ReasonApplied)
		// Claims date from creation, in whole seconds: the thief is younger.
		time.Sleep(time.Until(owner.CreationTimestamp.Add(1100 * time.Millisecond)))
		create(t, bob, service(teamB, "gw-thief"))
		thief := onGatewayAPI(apiRule(teamB, "gw-thief", "gw-owner.shared.example", "", backend("", "gw-thief"), noAuth("/*")))
		create(t, bob, thief)
		expectRefused(t, thief, gatewayv1alpha1.ReasonHostOccupied)
		expectNoLeak(t, thief)
		g := NewWithT(t)
		g.Consistently(func(g Gomega) { g.Expect(writtenFor(g, thief)).To(BeEmpty()) }, "2s", poll).Should(Succeed())
		g.Expect(readyOf(g, client.ObjectKeyFromObject(owner)).Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
		// `portico explain` tells team-b, in HTTPRoute mode, that another
		// namespace owns the host, and nothing of team-a (issue 47).
		e, out := explainedOnShared(g, bob, teamB, "gw-owner.shared.example", "/health")
		g.Expect(e.Outcome).To(Equal(explain.Outcome404), out)
		g.Expect(e.Reason).To(ContainSubstring("a host owned by another namespace"), out)
		g.Expect(out).NotTo(ContainSubstring(teamA))
	})
	t.Run("team-b's own HTTPRoute for team-a's host on the shared Gateway", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "gw-shop"))
		rule := onGatewayAPI(apiRule(teamA, "gw-shop", "gw-shop.a.example", "", backend("", "gw-shop"), noAuth("/health")))
		create(t, alice, rule)
		expectReason(t, rule, gatewayv1alpha1.ReasonRoutePending)
		hijack := &gatewayapiv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "gw-shop-hijack"},
			Spec: gatewayapiv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayapiv1.CommonRouteSpec{ParentRefs: []gatewayapiv1.ParentReference{{
					Namespace: ptr.To(gatewayapiv1.Namespace(rootNamespace)), Name: sharedGatewayAPIGateway,
				}}},
				Hostnames: []gatewayapiv1.Hostname{"gw-shop.a.example"},
			},
		}
		create(t, bob, hijack)
		g := NewWithT(t)
		var shared *metav1.Condition
		g.Eventually(func(g Gomega) {
			r := &gatewayv1alpha1.APIRule{}
			g.Expect(admin.Get(context.Background(), client.ObjectKeyFromObject(rule), r)).To(Succeed())
			shared = meta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionHostShared)
			g.Expect(shared).NotTo(BeNil())
			g.Expect(shared.Status).To(Equal(metav1.ConditionTrue))
		}, eventually, poll).Should(Succeed())
		g.Expect(shared.Message).NotTo(Or(ContainSubstring(teamB), ContainSubstring("hijack")), "names nothing of another namespace")
		g.Expect(writtenFor(g, rule)).To(ContainElement("HTTPRoute "+teamA+"/gw-shop"), "team-a's route stays")
		// `portico explain` in HTTPRoute mode (issue 47), with the Gateway
		// API's precedence over the stored (API-server defaulted) routes:
		// team-a's exact /health outranks the hijack's default prefix "/",
		// which takes every other path of the host and, without
		// backendRefs, answers 500; no implementation runs here, so both
		// routes are pending and said so. team-a, reading its own namespace
		// only, is not shown team-b's route.
		g.Eventually(func(g Gomega) {
			e, out := explainedOnShared(g, admin, "default", "gw-shop.a.example", "/health")
			g.Expect([]string{e.HTTPRoute, string(e.Outcome)}).To(Equal([]string{teamA + "/gw-shop", string(explain.OutcomeUnknown)}), out)
			g.Expect(out).To(ContainSubstring("pending"))
			g.Expect(out).To(ContainSubstring("rule 0 (path /health"))
			e, out = explainedOnShared(g, admin, "default", "gw-shop.a.example", "/other")
			g.Expect([]string{e.HTTPRoute, string(e.Outcome)}).To(Equal([]string{teamB + "/gw-shop-hijack", string(explain.Outcome500)}), out)
		}, eventually, poll).Should(Succeed())
		e, out := explainedOnShared(g, alice, teamA, "gw-shop.a.example", "/other")
		g.Expect(e.Outcome).To(Equal(explain.Outcome404), out)
		g.Expect(out).NotTo(Or(ContainSubstring(teamB), ContainSubstring("hijack")), "team-a learns nothing of team-b through the tool")
	})
}
