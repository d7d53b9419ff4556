package explain

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	securityv1beta1 "istio.io/api/security/v1beta1"
)

var (
	office   = netip.MustParseAddr("203.0.113.10")
	outsider = netip.MustParseAddr("198.51.100.5")
	balancer = netip.MustParseAddr("10.0.0.50")
)

// behindBalancer is a request of client through one load balancer, which
// appends the client's address to what the client wrote.
func behindBalancer(client netip.Addr, forged string) Arrival {
	xff := client.String()
	if forged != "" {
		xff = forged + ", " + xff
	}
	return Arrival{Peer: balancer, Headers: map[string]string{"x-forwarded-for": xff}}
}

func TestClientAddress(t *testing.T) {
	for name, tc := range map[string]struct {
		gw   EdgeGateway
		a    Arrival
		want netip.Addr
	}{
		"a direct client is its connection":                        {EdgeGateway{0}, Arrival{Peer: outsider}, outsider},
		"a direct client's own X-Forwarded-For is not trusted":     {EdgeGateway{0}, Arrival{Peer: outsider, Headers: map[string]string{"X-Forwarded-For": office.String()}}, outsider},
		"behind one balancer, its entry":                           {EdgeGateway{1}, behindBalancer(office, ""), office},
		"behind one balancer, a forged entry before it is ignored": {EdgeGateway{1}, behindBalancer(outsider, office.String()), outsider},
		"behind one balancer, forged entries are ignored":          {EdgeGateway{1}, behindBalancer(outsider, office.String()+", "+office.String()), outsider},
		"fewer entries than trusted proxies: the connection":       {EdgeGateway{2}, behindBalancer(office, ""), balancer},
		"a trusted entry that is no address: the connection":       {EdgeGateway{1}, Arrival{Peer: balancer, Headers: map[string]string{"x-forwarded-for": "unknown"}}, balancer},
		// What the administrator's count cannot help: a client that
		// reaches the gateway around the balancer writes the entry the
		// gateway trusts (docs/threat-model.md §19).
		"a client around the balancer forges the trusted entry": {EdgeGateway{1}, Arrival{Peer: outsider, Headers: map[string]string{"x-forwarded-for": office.String()}}, office},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(tc.gw.ClientAddress(tc.a)).To(Equal(tc.want))
		})
	}
}

func TestForwardedRemoteAddress(t *testing.T) {
	plain := &Routed{}
	portico := &Routed{RequestHeaders: map[string]string{"x-forwarded-for": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}}
	stripping := &Routed{RemovedRequestHeaders: []string{"x-forwarded-for"}}
	for name, tc := range map[string]struct {
		route *Routed
		a     Arrival
		want  netip.Addr
	}{
		// Why Portico sets X-Forwarded-For on client-address routes: the
		// sidecar reads the last entry, which Envoy made the balancer's.
		"without Portico's header, the sidecar sees the balancer": {plain, behindBalancer(office, ""), balancer},
		"with it, the client's address":                           {portico, behindBalancer(office, ""), office},
		"with it, a forged entry stays ignored":                   {portico, behindBalancer(outsider, office.String()), outsider},
		"a route removing it leaves the gateway's own address":    {stripping, behindBalancer(office, ""), gatewayPodIP},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f, err := EdgeGateway{1}.Forward(tc.route, tc.a)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.RemoteIP).To(Equal(tc.want))
		})
	}
	t.Run("another command operator is not modelled", func(t *testing.T) {
		_, err := EdgeGateway{}.Forward(&Routed{RequestHeaders: map[string]string{"x-peer": "%DOWNSTREAM_PEER_URI_SAN%"}}, Arrival{Peer: office})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("not modelled")))
	})
	t.Run("removals apply before the route's headers", func(t *testing.T) {
		g := NewWithT(t)
		f, err := EdgeGateway{}.Forward(&Routed{RemovedRequestHeaders: []string{"x-debug"}, RequestHeaders: map[string]string{"x-api": "2"}},
			Arrival{Peer: office, Headers: map[string]string{"X-Debug": "1", "x-keep": "k"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Headers).To(Equal(map[string]string{"x-api": "2", "x-keep": "k", "x-forwarded-for": office.String()}))
	})
}

func TestRemoteAddressPolicies(t *testing.T) {
	officeOnly := allow("team-a", "office", nil, rule(
		from(&securityv1beta1.Source{Namespaces: []string{"istio-system"}, RemoteIpBlocks: []string{"203.0.113.0/24"}}), paths("/admin/*")))
	portico := &Routed{RequestHeaders: map[string]string{"x-forwarded-for": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}}
	w := Workload{Namespace: "team-a", Labels: map[string]string{"app": "ledger"}}
	judgeAt := func(a Arrival) Verdict {
		f, err := EdgeGateway{1}.Forward(portico, a)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		v, err := Judge(teamA().with(aps(officeOnly)), f.At(w, "a.example.com", "/admin/users", "GET"))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return v
	}
	g := NewWithT(t)
	g.Expect(judgeAt(behindBalancer(office, "")).Allowed()).To(BeTrue(), "an office client")
	g.Expect(judgeAt(behindBalancer(outsider, "")).Allowed()).To(BeFalse(), "an outsider")
	g.Expect(judgeAt(behindBalancer(outsider, office.String())).Allowed()).To(BeFalse(), "an outsider forging the office's address")
	inMesh := Request{Workload: w, Path: "/admin/users", Method: "GET", Headers: map[string]string{"x-forwarded-for": office.String()},
		From: Peer{Principal: "cluster.local/ns/team-b/sa/default", IP: netip.MustParseAddr("10.0.3.4"), RemoteIP: office}}
	v, err := Judge(teamA().with(aps(officeOnly)), inMesh)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Allowed()).To(BeFalse(), "a pod of team-b writing the office's address: %v", v)
}

func TestRespond(t *testing.T) {
	route := &Routed{
		ResponseSet: map[string]string{"strict-transport-security": "max-age=600"}, ResponseAdd: map[string]string{"vary": "origin"},
		RemovedResponse: []string{"server"},
	}
	got := route.Respond(map[string][]string{"Server": {"nginx"}, "vary": {"accept"}, "strict-transport-security": {"max-age=0"}, "x-a": {"1"}})
	NewWithT(t).Expect(got).To(Equal(map[string][]string{
		"strict-transport-security": {"max-age=600"}, "vary": {"accept", "origin"}, "x-a": {"1"},
	}))
}
