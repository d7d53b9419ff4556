package explain

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
)

// ledgerWorld is team-a's ledger behind the public gateway: /health open,
// /admin for tokens of team-a's issuer (teamA), and /split weighted over
// the ledger and a Service the caller may not read.
func ledgerWorld() World {
	const public = "istio-system/public"
	split := httpRoute("ledger-split", "/split", "ledger.team-a.svc.cluster.local")
	split.Route[0].Weight = 50
	split.Route = append(split.Route, &networkingv1alpha3.HTTPRouteDestination{
		Destination: &networkingv1alpha3.Destination{Host: "secret.team-b.svc.cluster.local", Port: &networkingv1alpha3.PortSelector{Number: 8080}},
		Weight:      50,
	})
	vs := virtualService("team-a", "ledger", 0, []string{public}, []string{"ledger.a.example"},
		split, httpRoute("ledger", "/", "ledger.team-a.svc.cluster.local"))
	return World{
		Gateway:         public,
		VirtualServices: []*networkingv1.VirtualService{vs},
		Policies:        teamA(),
		Workloads:       map[string]map[string]string{"team-a/ledger": ledger.Labels},
	}
}

func TestExplain(t *testing.T) {
	hidden := ledgerWorld()
	hidden.Hidden = []string{"VirtualServices in namespace team-b"}
	foreign := ledgerWorld()
	foreign.ForeignHosts = []string{"shop.b.example"}
	cases := []struct {
		name    string
		world   World
		query   Query
		want    Outcome
		reason  string
		objects []string
	}{
		{"an open path is routed", ledgerWorld(), Query{Host: "ledger.a.example", Path: "/health", Method: "GET"}, OutcomeRouted, "",
			[]string{"Gateway istio-system/public", "VirtualService team-a/ledger", "Service team-a/ledger"}},
		{"a protected path without token is denied", ledgerWorld(), Query{Host: "ledger.a.example", Path: "/admin", Method: "GET"}, Outcome403, "", nil},
		{"a protected path with the issuer's token is routed", ledgerWorld(), Query{Host: "ledger.a.example", Path: "/admin", Method: "GET", Token: tokenA}, OutcomeRouted, "", nil},
		{"a token signed with another key set is rejected", ledgerWorld(), Query{Host: "ledger.a.example", Path: "/admin", Method: "GET", Token: forged}, Outcome401, "", nil},
		{"an unknown host is not found", ledgerWorld(), Query{Host: "nowhere.example", Path: "/", Method: "GET"}, Outcome404, "no route of the gateway", nil},
		{"a caller who may not read everything is told so", hidden, Query{Host: "nowhere.example", Path: "/", Method: "GET"}, Outcome404, "objects you may not read might", nil},
		{"another namespace's host is said as such, never whose", foreign, Query{Host: "SHOP.b.example", Path: "/", Method: "GET"}, Outcome404, "a host owned by another namespace", nil},
		{"a backend whose Service is not visible is unknown", ledgerWorld(), Query{Host: "ledger.a.example", Path: "/split", Method: "GET"}, OutcomeUnknown, "decide differently", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Explain(c.world, c.query)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Outcome).To(Equal(c.want), "%+v", got)
			g.Expect(got.Reason).To(ContainSubstring(c.reason))
			var objects []string
			for _, s := range got.Steps {
				objects = append(objects, s.Objects...)
			}
			g.Expect(objects).To(ContainElements(c.objects))
			g.Expect(strings.Join(objects, " ")).NotTo(ContainSubstring("team-b"), "a namespace the caller may not read is never named")
		})
	}
}

func TestExplainAgreesWithTheJudge(t *testing.T) {
	w := ledgerWorld()
	for _, path := range []string{"/health", "/admin", "/other"} {
		for _, token := range []*Token{nil, tokenA, forged} {
			g := NewWithT(t)
			got, err := Explain(w, Query{Host: "ledger.a.example", Path: path, Method: "GET", Token: token})
			g.Expect(err).NotTo(HaveOccurred())
			v, err := Judge(w.Policies, get(path, token))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Backends).To(HaveLen(1))
			g.Expect(got.Backends[0].Reason).To(Equal(v.Reason), "%s with %v", path, token)
			g.Expect(string(got.Outcome)).To(Equal(map[Decision]string{Allowed: "routed", Unauthenticated: "401", Forbidden: "403"}[v.Decision]))
		}
	}
}
