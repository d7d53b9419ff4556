package tenancy

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/explain"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// Issue 43, parts 3 and 4 (docs/threat-model.md §18 and §19): header
// removals and response headers keep identity intact, and client addresses
// cannot be forged.

// Addresses of the client-address story: the cluster has one load
// balancer in front of its gateways (trustedProxies 1).
var (
	officeClient  = netip.MustParseAddr("203.0.113.10")
	outsideClient = netip.MustParseAddr("198.51.100.5")
	loadBalancer  = netip.MustParseAddr("10.0.0.50")
	edge          = judge.EdgeGateway{TrustedProxies: 1}
)

// through is a request of client through the load balancer, which appends
// the client's address to the X-Forwarded-For the client wrote (forged).
func through(client netip.Addr, forged string, headers map[string]string) judge.Arrival {
	h := map[string]string{}
	for k, v := range headers {
		h[k] = v
	}
	h["x-forwarded-for"] = client.String()
	if forged != "" {
		h["x-forwarded-for"] = forged + ", " + client.String()
	}
	return judge.Arrival{Peer: loadBalancer, Headers: h}
}

// trustOneProxy sets the administrator's trusted-proxy count for the test.
func trustOneProxy(t *testing.T) {
	t.Helper()
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
	set := func(n *int32) func(*operatorv1alpha1.APIGateway) {
		return func(gw *operatorv1alpha1.APIGateway) {
			if gw.Spec.APIRules == nil {
				gw.Spec.APIRules = &operatorv1alpha1.APIRulesSpec{}
			}
			gw.Spec.APIRules.TrustedProxies = n
		}
	}
	update(t, admin, gw, set(ptr.To[int32](1)))
	t.Cleanup(func() { update(t, admin, gw, set(nil)) })
}

// throughEdge judges a request arriving at the edge on the stored objects:
// the route the gateway takes, what it forwards, and the backend sidecar's
// verdict. It returns false for a request no route takes.
func throughEdge(g Gomega, host, path string, w judge.Workload, a judge.Arrival) bool {
	r := route(g, publicGateway, host, path)
	e := explained(g, host, path, a)
	if r == nil {
		agree(g, r, w, judge.Verdict{}, e)
		return false
	}
	f, err := edge.Forward(r, a)
	g.Expect(err).NotTo(HaveOccurred())
	v := decide(g, f.At(w, host, path, "GET"))
	agree(g, r, w, v, e)
	return v.Allowed()
}

func withClients(rule gatewayv1alpha1.Rule, allow, deny []gatewayv1alpha1.AddressBlock) gatewayv1alpha1.Rule {
	rule.ClientAddresses = &gatewayv1alpha1.ClientAddresses{Allow: allow, Deny: deny}
	return rule
}

// Class 3 (widened access) and class 2 (forged identity) by address:
// team-a opens /admin/* to its office only; every request is judged from
// the edge (the load balancer, the gateway's X-Forwarded-For handling, the
// route's header operations) to the sidecar's verdict.
func TestClientAddressesCannotBeForged(t *testing.T) {
	trustOneProxy(t)
	create(t, alice, service(teamA, "backoffice"))
	create(t, bob, service(teamB, "kiosk"))
	officeOnly := apiRule(teamA, "backoffice", "backoffice.a.example", publicGateway, backend("", "backoffice"),
		noAuth("/health"), withClients(noAuth("/admin/*"), []gatewayv1alpha1.AddressBlock{"203.0.113.0/24"}, nil))
	create(t, alice, officeOnly)
	expectReason(t, officeOnly, gatewayv1alpha1.ReasonApplied)
	w := judge.Workload{Namespace: teamA, Labels: map[string]string{"app": "backoffice"}}
	const host = "backoffice.a.example"

	t.Run("an office client reaches /admin, everyone /health", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(throughEdge(g, host, "/admin/users", w, through(officeClient, "", nil))).To(BeTrue())
			g.Expect(throughEdge(g, host, "/health", w, through(outsideClient, "", nil))).To(BeTrue())
		}, eventually, poll).Should(Succeed())
	})
	for name, a := range map[string]judge.Arrival{
		"an outside client": through(outsideClient, "", nil),
		"an outside client writing the office's address":            through(outsideClient, officeClient.String(), nil),
		"an outside client writing the office's address twice":      through(outsideClient, officeClient.String()+", "+officeClient.String(), nil),
		"an outside client writing x_forwarded_for":                 through(outsideClient, "", map[string]string{"x_forwarded_for": officeClient.String()}),
		"an outside client writing x-real-ip and forwarded":         through(outsideClient, "", map[string]string{"x-real-ip": officeClient.String(), "forwarded": "for=" + officeClient.String()}),
		"an outside client writing x-envoy-external-address":        through(outsideClient, "", map[string]string{"x-envoy-external-address": officeClient.String()}),
		"an outside client writing garbage where the office's goes": through(outsideClient, "unknown, "+officeClient.String()+", not-an-ip", nil),
	} {
		t.Run(name+" is denied /admin", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(throughEdge(g, host, "/admin/users", w, a)).To(BeFalse())
		})
	}
	t.Run("a pod of team-b calling team-a's pods directly with the office's address is denied", func(t *testing.T) {
		g := NewWithT(t)
		r := judge.Request{Workload: w, Host: host, Path: "/admin/users", Method: "GET",
			Headers: map[string]string{"x-forwarded-for": officeClient.String()},
			From:    judge.Peer{Principal: "cluster.local/ns/team-b/sa/default", IP: netip.MustParseAddr("10.0.9.9"), RemoteIP: officeClient}}
		g.Expect(decide(g, r).Allowed()).To(BeFalse())
	})
	t.Run("team-b's noAuth route to team-a's consenting Service does not open /admin", func(t *testing.T) {
		update(t, alice, service(teamA, "backoffice"), consentingTo(teamB))
		t.Cleanup(func() {
			update(t, alice, service(teamA, "backoffice"), func(s *corev1.Service) { s.Annotations = nil })
		})
		side := apiRule(teamB, "backdoor", "backdoor.b.example", publicGateway, backend(teamA, "backoffice"), noAuth("/*"))
		create(t, bob, side)
		expectReason(t, side, gatewayv1alpha1.ReasonApplied)
		g := NewWithT(t)
		g.Expect(throughEdge(g, "backdoor.b.example", "/admin/users", w, through(outsideClient, officeClient.String(), nil))).To(BeFalse())
		g.Expect(throughEdge(g, "backdoor.b.example", "/admin/users", w, through(officeClient, "", nil))).To(BeFalse(),
			"team-b's route does not set the client address, so even the office is denied through it: it cannot pass another's allow list")
	})
	t.Run("team-b's client-address rule on team-a's consenting Service is refused, nothing written", func(t *testing.T) {
		update(t, alice, service(teamA, "backoffice"), consentingTo(teamB))
		obj := apiRule(teamB, "borrowed-list", "borrowed-list.b.example", publicGateway, backend(teamA, "backoffice"),
			withClients(noAuth("/admin/*"), []gatewayv1alpha1.AddressBlock{"198.51.100.0/24"}, nil))
		create(t, bob, obj)
		c := expectRefused(t, obj, gatewayv1alpha1.ReasonInvalidRule)
		g := NewWithT(t)
		g.Expect(c.Message).To(ContainSubstring("routes to service team-a/backoffice of another namespace"))
		g.Expect(writtenFor(g, obj)).To(BeEmpty())
		g.Expect(throughEdge(g, host, "/admin/users", w, through(outsideClient, "", nil))).To(BeFalse())
	})
	t.Run("team-b's deny-all address rule on its own pods changes nothing for team-a", func(t *testing.T) {
		obj := apiRule(teamB, "kiosk", "kiosk.b.example", publicGateway, backend("", "kiosk"),
			withClients(noAuth("/*"), nil, []gatewayv1alpha1.AddressBlock{"0.0.0.0/0", "::/0"}))
		create(t, bob, obj)
		expectReason(t, obj, gatewayv1alpha1.ReasonApplied)
		g := NewWithT(t)
		kiosk := judge.Workload{Namespace: teamB, Labels: map[string]string{"app": "kiosk"}}
		g.Expect(throughEdge(g, "kiosk.b.example", "/", kiosk, through(officeClient, "", nil))).To(BeFalse())
		g.Expect(throughEdge(g, host, "/admin/users", w, through(officeClient, "", nil))).To(BeTrue())
		g.Expect(throughEdge(g, host, "/health", w, through(outsideClient, "", nil))).To(BeTrue())
	})
	t.Run("team-b setting the trusted-proxy count is forbidden", func(t *testing.T) {
		gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
		err := bob.Patch(context.Background(), gw, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"apiRules":{"trustedProxies":2}}}`)), client.DryRunAll)
		NewWithT(t).Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	})
}

// Class 2 (forged identity) by removal, and response headers: no APIRule
// removes what the mesh reads after the gateway, or sets what Envoy,
// spec.cors or the backend's sessions own; a tenant's header changes stay
// on its own routes.
func TestHeaderChangesKeepIdentity(t *testing.T) {
	protectLedger(t, "ledger-strip", teamB)
	create(t, bob, service(teamB, "storefront"))
	for i, name := range []gatewayv1alpha1.RemovedRequestHeader{"authorization", "x-forwarded-for", "x_forwarded_for", "X-Forwarded-For",
		"x-forwarded-client-cert", "forwarded", "x.real.ip", "x-request-id", "traceparent", "x-b3-traceid", "x-envoy-external-address", "host"} {
		t.Run("team-b removing "+string(name)+" on team-a's consenting Service is refused by the API server", func(t *testing.T) {
			t.Parallel()
			rule := noAuth("/*")
			rule.Request = &gatewayv1alpha1.RequestModifier{RemoveHeaders: []gatewayv1alpha1.RemovedRequestHeader{name}}
			id := fmt.Sprintf("strip-%d", i)
			obj := apiRule(teamB, id, id+".b.example", publicGateway, backend(teamA, "ledger-strip"), rule)
			err := bob.Create(context.Background(), obj)
			NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		})
	}
	for name, m := range map[string]gatewayv1alpha1.ResponseModifier{
		"setting a session cookie for every caller": {Set: map[string]gatewayv1alpha1.ResponseHeaderValue{"set-cookie": "session=fixed; Domain=example"}},
		"the same as Set_Cookie":                    {Set: map[string]gatewayv1alpha1.ResponseHeaderValue{"Set_Cookie": "session=fixed"}},
		"opening CORS around spec.cors":             {Add: []gatewayv1alpha1.ResponseHeader{{Name: "access-control-allow-origin", Value: "*"}}},
		"removing the authorizer's login cookie":    {Remove: []gatewayv1alpha1.ResponseHeaderName{"set-cookie"}},
		"rewriting the framing":                     {Set: map[string]gatewayv1alpha1.ResponseHeaderValue{"transfer-encoding": "chunked"}},
		"a header smuggled in a value":              {Set: map[string]gatewayv1alpha1.ResponseHeaderValue{"x-a": "1\r\nset-cookie: s=1"}},
		"reading the gateway's data in a value":     {Set: map[string]gatewayv1alpha1.ResponseHeaderValue{"x-peer": "%DOWNSTREAM_PEER_URI_SAN%"}},
	} {
		t.Run("team-b "+name+" is refused by the API server", func(t *testing.T) {
			t.Parallel()
			rule := noAuth("/*")
			rule.Response = m.DeepCopy()
			obj := apiRule(teamB, "respond", "respond.b.example", publicGateway, backend("", "storefront"), rule)
			err := bob.Create(context.Background(), obj)
			NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		})
	}
	t.Run("team-b's security headers and removals apply to its own host only", func(t *testing.T) {
		rule := noAuth("/*")
		rule.Request = &gatewayv1alpha1.RequestModifier{RemoveHeaders: []gatewayv1alpha1.RemovedRequestHeader{"x-debug"}}
		rule.Response = &gatewayv1alpha1.ResponseModifier{
			Set:    map[string]gatewayv1alpha1.ResponseHeaderValue{"strict-transport-security": "max-age=31536000"},
			Remove: []gatewayv1alpha1.ResponseHeaderName{"server"},
		}
		obj := apiRule(teamB, "storefront", "storefront.b.example", publicGateway, backend("", "storefront"), rule)
		create(t, bob, obj)
		expectReason(t, obj, gatewayv1alpha1.ReasonApplied)
		g := NewWithT(t)
		backendAnswer := map[string][]string{"server": {"nginx"}, "content-type": {"text/plain"}}
		own := route(g, publicGateway, "storefront.b.example", "/")
		g.Expect(own.Respond(backendAnswer)).To(Equal(map[string][]string{"strict-transport-security": {"max-age=31536000"}, "content-type": {"text/plain"}}))
		f, err := edge.Forward(own, through(officeClient, "", map[string]string{"x-debug": "1", "authorization": "Bearer t"}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Headers).NotTo(HaveKey("x-debug"))
		g.Expect(f.Headers).To(HaveKeyWithValue("authorization", "Bearer t"), "the token still reaches the sidecar")
		g.Expect(f.Headers).To(HaveKey("x-forwarded-for"), "the client address still reaches the sidecar")
		theirs := route(g, publicGateway, "ledger-strip.a.example", "/health")
		g.Expect(theirs).NotTo(BeNil())
		g.Expect(theirs.Respond(backendAnswer)).To(Equal(backendAnswer), "team-a's responses are untouched")
	})
}

// explained is what `portico explain` says of a request arriving at the
// edge, over every stored object (the cluster administrator's view, read
// as the tool reads it: explain.Read).
func explained(g Gomega, host, path string, a judge.Arrival) explain.Explanation {
	w, err := explain.Read(context.Background(), admin, "default", publicGateway, edge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Hidden).To(BeEmpty(), "the administrator reads everything")
	w.Policies.RootNamespace = rootNamespace
	e, err := explain.Explain(w, explain.Query{Host: host, Path: path, Method: "GET", Headers: a.Headers, Peer: a.Peer})
	g.Expect(err).NotTo(HaveOccurred())
	return e
}

// agree checks that `portico explain` and the judge decide a request alike
// (issue 47): no route is a 404, else the judge's decision, whenever the
// route's one backend is the workload the judge was asked about.
func agree(g Gomega, r *judge.Routed, w judge.Workload, v judge.Verdict, e explain.Explanation) {
	if r == nil {
		g.Expect(e.Outcome).To(Equal(explain.Outcome404), "explain: %+v", e)
		return
	}
	if len(r.Destinations) != 1 || r.Destinations[0].Namespace != w.Namespace || r.Destinations[0].Service != w.Labels["app"] {
		return
	}
	want := map[judge.Decision]explain.Outcome{judge.Allowed: explain.OutcomeRouted, judge.Unauthenticated: explain.Outcome401, judge.Forbidden: explain.Outcome403}[v.Decision]
	if v.Authorizer != "" {
		// The judge takes an external authorizer as denying; explain says
		// the authorizer decides.
		want = explain.OutcomeAuthorizer
	}
	g.Expect(e.Outcome).To(Equal(want), "explain: %+v; judge: %s", e, v)
	g.Expect(e.Reason).To(Equal(v.Reason))
}
