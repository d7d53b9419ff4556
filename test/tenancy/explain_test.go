package tenancy

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/explain"
)

// explainedAs is what `portico explain` tells a caller with its own
// client and namespace (explain.Read, as kubectl-portico reads).
func explainedAs(g Gomega, as client.Reader, namespace, host, path string) (explain.Explanation, string) {
	w, err := explain.Read(context.Background(), as, namespace, publicGateway, edge)
	g.Expect(err).NotTo(HaveOccurred())
	w.Policies.RootNamespace = rootNamespace
	e, err := explain.Explain(w, explain.Query{Host: host, Path: path, Method: "GET"})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := json.Marshal(e)
	g.Expect(err).NotTo(HaveOccurred())
	return e, string(out)
}

// explainRoute explains a request to host and path over HTTP, and over
// HTTPS when the gateway's listener redirects HTTP to HTTPS itself (the
// default gateway's HTTP server): the judge's routing is what the routes
// behind the listener do.
func explainRoute(g Gomega, w explain.World, host, path string) explain.Explanation {
	var e explain.Explanation
	for _, tls := range []bool{false, true} {
		var err error
		e, err = explain.Explain(w, explain.Query{Host: host, Path: path, Method: "GET", TLS: tls})
		g.Expect(err).NotTo(HaveOccurred())
		if last := e.Steps[len(e.Steps)-1]; last.Stage != "listener" || e.Outcome != explain.OutcomeRouted {
			return e // not the listener's redirect
		}
	}
	return e
}

// explainedOnShared is what `portico explain` tells a caller of a request
// in HTTPRoute mode on the shared Gateway API Gateway (`--parent`).
func explainedOnShared(g Gomega, as client.Reader, namespace, host, path string) (explain.Explanation, string) {
	w, err := explain.ReadMode(context.Background(), as, namespace, rootNamespace+"/"+sharedGatewayAPIGateway, true, edge)
	g.Expect(err).NotTo(HaveOccurred())
	w.Policies.RootNamespace = rootNamespace
	e, err := explain.Explain(w, explain.Query{Host: host, Path: path, Method: "GET"})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := json.Marshal(e)
	g.Expect(err).NotTo(HaveOccurred())
	return e, string(out)
}

// Class 5 (information disclosure) through the tool (issue 47): team-a,
// whose claim on team-b's host was refused, asks `portico explain` about
// that host with its own RBAC (edit in team-a). It learns that another
// namespace owns the host — what its APIRule's status already says — and
// nothing more: no namespace, object, route or Service of team-b. The
// administrator, explaining the same request, sees team-b's route.
func TestExplainShowsATenantOnlyWhatItMayRead(t *testing.T) {
	const host = "explain-shop.b.example"
	create(t, bob, service(teamB, "explain-shop"))
	shop := apiRule(teamB, "explain-shop", host, publicGateway, backend("", "explain-shop"), noAuth("/*"))
	create(t, bob, shop)
	expectReason(t, shop, gatewayv1alpha1.ReasonApplied)
	// Claims date from creationTimestamp (whole seconds): team-a's is younger.
	time.Sleep(time.Until(shop.CreationTimestamp.Add(1100 * time.Millisecond)))
	claim := apiRule(teamA, "explain-claim", host, publicGateway, backend("", "explain-claim"), noAuth("/*"))
	create(t, alice, service(teamA, "explain-claim"))
	create(t, alice, claim)
	expectRefused(t, claim, gatewayv1alpha1.ReasonHostOccupied)

	NewWithT(t).Eventually(func(g Gomega) {
		e, out := explainedAs(g, admin, "default", host, "/items")
		g.Expect(e.Outcome).To(Equal(explain.OutcomeRouted), out)
		g.Expect(e.VirtualService).To(HavePrefix(teamB+"/"), out)
		g.Expect(out).To(ContainSubstring("APIRule " + teamB + "/explain-shop"))
	}, eventually, poll).Should(Succeed())

	g := NewWithT(t)
	e, out := explainedAs(g, alice, teamA, host, "/items")
	g.Expect(e.Outcome).To(Equal(explain.Outcome404), out)
	g.Expect(e.Reason).To(ContainSubstring("a host owned by another namespace"))
	g.Expect(out).To(ContainSubstring("not visible to you"))
	g.Expect(out).NotTo(ContainSubstring(teamB), "team-a learns nothing of team-b through the tool")
	g.Expect(out).NotTo(ContainSubstring("explain-shop"))

	// team-b explains its own host with its own RBAC: routed, to its rule.
	e, out = explainedAs(g, bob, teamB, host, "/items")
	g.Expect(e.Outcome).To(Equal(explain.OutcomeRouted), out)
	g.Expect(out).To(ContainSubstring("rule 0 (path /*, every method) of APIRule " + teamB + "/explain-shop"))
	g.Expect(out).NotTo(ContainSubstring(teamA))
}
