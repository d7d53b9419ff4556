package tenancy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/explain"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// Labels the apirule controller puts on what it writes for an APIRule.
const (
	labelAPIRule          = "gateway.portico.dev/apirule"
	labelAPIRuleNamespace = "gateway.portico.dev/apirule-namespace"
)

// followUp is how long the checks that follow a verdict wait for its
// consequences: the whole timeout when the verdict came, a single look when
// it never did (the cluster has had the whole timeout to settle already),
// so that a broken guarantee costs one timeout, not one per check.
func followUp(verdictCame bool) time.Duration {
	if verdictCame {
		return eventually
	}
	return time.Millisecond
}

// readyOf returns an APIRule's Ready condition once the controller has
// written it for the current generation.
func readyOf(g Gomega, key client.ObjectKey) *metav1.Condition {
	r := &gatewayv1alpha1.APIRule{}
	g.Expect(admin.Get(context.Background(), key, r)).To(Succeed())
	c := meta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil(), "APIRule %s has no Ready condition yet", key)
	g.Expect(c.ObservedGeneration).To(Equal(r.Generation), "APIRule %s: status of an older generation", key)
	return c
}

// awaitObserved waits until the controller has judged the APIRule's
// current generation, whatever the verdict, and returns it.
func awaitObserved(t *testing.T, obj client.Object) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) { c = readyOf(g, client.ObjectKeyFromObject(obj)) }, eventually, poll).Should(Succeed())
	return c
}

// expectReason waits for the APIRule's Ready reason.
func expectReason(t *testing.T, obj client.Object, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		c = readyOf(g, client.ObjectKeyFromObject(obj))
		g.Expect(c.Reason).To(Equal(reason), "APIRule %s/%s: %s", obj.GetNamespace(), obj.GetName(), c.Message)
	}, eventually, poll).Should(Succeed())
	return c
}

// expectRefused waits until the APIRule is refused with reason.
func expectRefused(t *testing.T, obj client.Object, reason string) *metav1.Condition {
	t.Helper()
	c := expectReason(t, obj, reason)
	NewWithT(t).Expect(c.Status).To(Equal(metav1.ConditionFalse))
	return c
}

// expectNoLeak checks that the APIRule's status names nothing of team-a:
// neither the namespace nor any of the given names.
func expectNoLeak(t *testing.T, obj client.Object, names ...string) {
	t.Helper()
	g := NewWithT(t)
	c := awaitObserved(t, obj)
	for _, s := range append([]string{teamA}, names...) {
		g.Expect(c.Message).NotTo(ContainSubstring(s), "the status of %s/%s leaks team-a's objects", obj.GetNamespace(), obj.GetName())
	}
}

// writtenFor names every Istio object (and HTTPRoute) written for an APIRule, in any
// namespace: labelled for it, or owned by it.
func writtenFor(g Gomega, rule client.Object) []string {
	ctx := context.Background()
	var names []string
	lists := []client.ObjectList{&networkingv1.VirtualServiceList{}, &securityv1.AuthorizationPolicyList{}, &securityv1.RequestAuthenticationList{}, &gatewayapiv1.HTTPRouteList{}}
	for _, list := range lists {
		g.Expect(admin.List(ctx, list)).To(Succeed())
		g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			l := obj.GetLabels()
			labelled := l[labelAPIRule] == rule.GetName() && l[labelAPIRuleNamespace] == rule.GetNamespace()
			owned := false
			for _, ref := range obj.GetOwnerReferences() {
				owned = owned || ref.UID == rule.GetUID()
			}
			if labelled || owned {
				names = append(names, kindName(obj))
			}
			return nil
		})).To(Succeed())
	}
	return names
}

func kindName(obj client.Object) string {
	kind := "object"
	if gvk, err := apiutil.GVKForObject(obj, admin.Scheme()); err == nil {
		kind = gvk.Kind
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// storedPolicies reads every AuthorizationPolicy and RequestAuthentication
// of the cluster, as Istio would.
func storedPolicies(g Gomega) judge.Policies {
	ctx := context.Background()
	var aps securityv1.AuthorizationPolicyList
	var ras securityv1.RequestAuthenticationList
	g.Expect(admin.List(ctx, &aps)).To(Succeed())
	g.Expect(admin.List(ctx, &ras)).To(Succeed())
	return judge.Policies{AuthorizationPolicies: aps.Items, RequestAuthentications: ras.Items, RootNamespace: rootNamespace}
}

// decide judges a request on the stored policies.
func decide(g Gomega, r judge.Request) judge.Verdict {
	v, err := judge.Judge(storedPolicies(g), r)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

// route finds where the stored VirtualServices send a request through a gateway.
func route(g Gomega, gateway, host, path string) *judge.Routed {
	var vss networkingv1.VirtualServiceList
	g.Expect(admin.List(context.Background(), &vss)).To(Succeed())
	r, err := judge.Route(vss.Items, gateway, host, path, "GET")
	g.Expect(err).NotTo(HaveOccurred())
	// `portico explain` takes the same route (issue 47): every routing
	// check of the suite is a check of the tool too.
	w, err := explain.Read(context.Background(), admin, "default", gateway, edge)
	g.Expect(err).NotTo(HaveOccurred())
	e := explainRoute(g, w, host, path)
	if r == nil {
		g.Expect(e.Outcome).To(Equal(explain.Outcome404), "explain routes what the judge does not: %+v", e)
	} else {
		g.Expect([]string{e.VirtualService, e.Route}).To(Equal([]string{r.VirtualService, r.Route}), "explain: %+v", e)
	}
	return r
}

// destinationNamespaces are the namespaces a route sends traffic to.
func destinationNamespaces(r *judge.Routed) []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, d := range r.Destinations {
		out = append(out, d.Namespace)
	}
	return out
}

// expectNotRouted checks that no gateway routes the host (its root, /admin
// and the given paths).
func expectNotRouted(g Gomega, host string, paths ...string) {
	for _, gw := range []string{publicGateway, internalGateway} {
		for _, p := range append([]string{"/", "/admin"}, paths...) {
			r := route(g, gw, host, p)
			g.Expect(r).To(BeNil(), "%s%s on %s is routed by %v", host, p, gw, r)
		}
	}
}
