package tenancy

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// poison is a status a tenant with status rights writes that the API
// server admits but Go cannot decode.
type poison struct {
	gvk   schema.GroupVersionKind
	name  string
	patch string
	// path and want locate the stored value that proves the API server took it.
	path []string
	want any
}

var poisons = []poison{{
	gvk:   gatewayv1alpha1.GroupVersion.WithKind("APIRule"),
	name:  "poison",
	patch: `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Applied","message":"fine","lastTransitionTime":"2026-01-01T00:00:00z"}]}}`,
	path:  []string{"status", "conditions"},
}, {
	gvk:   networkingv1.SchemeGroupVersion.WithKind("Gateway"),
	name:  "poison",
	patch: `{"status":{"observedGeneration":"not-a-number"}}`,
	path:  []string{"status", "observedGeneration"},
	want:  "not-a-number",
}, {
	gvk:   networkingv1.SchemeGroupVersion.WithKind("VirtualService"),
	name:  "poison", // the one the apirule controller wrote for the APIRule
	patch: `{"status":{"observedGeneration":"not-a-number"}}`,
	path:  []string{"status", "observedGeneration"},
	want:  "not-a-number",
}}

// Class 6: an object that the API server accepts but Go cannot decode, of
// any kind a controller watches, stops nothing: every other object keeps
// converging, also after the controllers restart.
func TestUndecodableObjectsStopNothing(t *testing.T) {
	create(t, bob, service(teamB, "poison"))
	rule := apiRule(teamB, "poison", "poison.b.example", publicGateway, backend("", "poison"), noAuth("/*"))
	create(t, bob, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
	workloadPod(t, teamB, "poison-edge-0", map[string]string{"app": "poison-edge"}, "")
	create(t, bob, istioGateway(teamB, "poison", map[string]string{"app": "poison-edge"}))

	workloadPod(t, teamA, "steady-edge-0", map[string]string{"app": "steady-edge"}, "")
	create(t, alice, istioGateway(teamA, "steady-edge", map[string]string{"app": "steady-edge"}))
	limit := rateLimit(teamA, "steady-edge", gatewayv1alpha1.TargetGateway, "steady-edge", 10)
	create(t, alice, limit)
	expectLimitReason(t, limit, gatewayv1alpha1.ReasonEnforced)

	for _, p := range poisons {
		writePoison(t, p)
	}
	expectConverging(t, "while team-b's objects are undecodable", limit, 11, eventually)
	ready := t.Run("both controllers become ready after a restart", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range controllerNames {
			g.Expect(controllers[name].restart()).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			for _, name := range controllerNames {
				g.Expect(controllers[name].ready(context.Background())).To(Succeed())
			}
		}, eventually, poll).Should(Succeed())
	})
	expectConverging(t, "after the restart", limit, 12, followUp(ready))
	t.Run("the undecodable APIRule is reported with an Event in team-b", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(bob.List(context.Background(), &events, client.InNamespace(teamB))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Kind", "APIRule"), HaveField("InvolvedObject.Name", rule.Name))))
		}, eventually, poll).Should(Succeed())
	})
}

// writePoison patches a status as bob, raw, and checks the API server kept it.
func writePoison(t *testing.T, p poison) {
	t.Helper()
	g := NewWithT(t)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(p.gvk)
	obj.SetNamespace(teamB)
	obj.SetName(p.name)
	g.Expect(bob.Status().Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(p.patch)))).
		To(Succeed(), "bob may write the status of %s %s/%s", p.gvk.Kind, teamB, p.name)
	g.Expect(admin.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	stored, found, err := unstructured.NestedFieldNoCopy(obj.Object, p.path...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "the API server dropped the poisoned %s status", p.gvk.Kind)
	if p.want != nil {
		g.Expect(stored).To(Equal(p.want))
	}
}

// expectConverging checks, waiting at most wait for each, that team-a's
// changes still reach the cluster: a new APIRule is applied and a RateLimit
// change reaches its EnvoyFilter.
func expectConverging(t *testing.T, when string, limit *gatewayv1alpha1.RateLimit, maxTokens int64, wait time.Duration) {
	t.Helper()
	t.Run("team-a's new APIRule is applied "+when, func(t *testing.T) {
		name := fmt.Sprintf("fresh-%d", maxTokens)
		create(t, alice, service(teamA, name))
		rule := apiRule(teamA, name, name+".a.example", publicGateway, backend("", name), protectedAPI()...)
		create(t, alice, rule)
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(readyOf(g, client.ObjectKeyFromObject(rule)).Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
		}, wait, poll).Should(Succeed())
	})
	t.Run("team-a's RateLimit change reaches its EnvoyFilter "+when, func(t *testing.T) {
		update(t, alice, limit, func(l *gatewayv1alpha1.RateLimit) { l.Spec.Local.MaxTokens = maxTokens })
		var live *gatewayv1alpha1.RateLimit
		NewWithT(t).Eventually(func(g Gomega) {
			l, c := limitOf(g, client.ObjectKeyFromObject(limit))
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), c.Message)
			live = l
		}, wait, poll).Should(Succeed())
		expectBuckets(t, live.Status.EnvoyFilters, []string{""}, float64(maxTokens), wait)
	})
}
