package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// A rule's response headers and request header removals reach its route.
func TestResponseHeadersAndRemovalsAreRouted(t *testing.T) {
	createService(t, "secure")
	createAPIRule(t, "secure", "secure", porticov1alpha1.Rule{
		Path: "/*", NoAuth: ptr.To(true),
		Request: &porticov1alpha1.RequestModifier{RemoveHeaders: []porticov1alpha1.RemovedRequestHeader{"x-debug"}},
		Response: &porticov1alpha1.ResponseModifier{
			Set:    map[string]porticov1alpha1.ResponseHeaderValue{"strict-transport-security": "max-age=31536000"},
			Remove: []porticov1alpha1.ResponseHeaderName{"server"},
		},
	})
	expectReason(t, ns, "secure", porticov1alpha1.ReasonApplied)
	g := NewWithT(t)
	vs := &networkingv1.VirtualService{}
	get(g, "secure", vs)
	h := vs.Spec.Http[0].Headers
	g.Expect(h.GetRequest().GetRemove()).To(Equal([]string{"x-debug"}))
	g.Expect(h.GetResponse().GetSet()).To(Equal(map[string]string{"strict-transport-security": "max-age=31536000"}))
	g.Expect(h.GetResponse().GetRemove()).To(Equal([]string{"server"}))
}

// Client-address rules wait for the administrator's trusted-proxy count,
// then require the address of requests from the gateway's namespace; an
// APIRule that would open the same path to every client on the same pods
// is an AccessConflict.
func TestClientAddressesNeedTheTrustedProxyCount(t *testing.T) {
	ctx := context.Background()
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName},
		Spec: operatorv1alpha1.APIGatewaySpec{APIRules: &operatorv1alpha1.APIRulesSpec{}}}
	NewWithT(t).Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, gw) })

	createService(t, "office")
	createAPIRule(t, "office", "office", health, porticov1alpha1.Rule{Path: "/admin/*", NoAuth: ptr.To(true),
		ClientAddresses: &porticov1alpha1.ClientAddresses{Allow: []porticov1alpha1.AddressBlock{"203.0.113.0/24"}}})
	c := expectReason(t, ns, "office", porticov1alpha1.ReasonInvalidRule)
	NewWithT(t).Expect(c.Message).To(ContainSubstring("APIGateway spec.apiRules.trustedProxies"))
	NewWithT(t).Expect(gone("office", &securityv1.AuthorizationPolicy{})()).To(BeTrue())

	NewWithT(t).Eventually(func() error {
		live := &operatorv1alpha1.APIGateway{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gw), live); err != nil {
			return err
		}
		live.Spec.APIRules.TrustedProxies = ptr.To[int32](1)
		return k8sClient.Update(ctx, live)
	}, eventually).Should(Succeed())
	expectReason(t, ns, "office", porticov1alpha1.ReasonApplied)

	g := NewWithT(t)
	ap := &securityv1.AuthorizationPolicy{}
	get(g, "office", ap)
	var source string
	for _, rule := range ap.Spec.Rules {
		if rule.To[0].Operation.Paths[0] == "/admin/*" {
			g.Expect(rule.From).To(HaveLen(1))
			g.Expect(rule.From[0].Source.RemoteIpBlocks).To(Equal([]string{"203.0.113.0/24"}))
			g.Expect(rule.From[0].Source.Namespaces).To(Equal([]string{"istio-system"}))
			source = "found"
		}
	}
	g.Expect(source).To(Equal("found"), "the /admin/* rule of %v", ap.Spec.Rules)
	vs := &networkingv1.VirtualService{}
	get(g, "office", vs)
	for _, route := range vs.Spec.Http {
		if route.Match[0].Uri.GetPrefix() == "/admin/" {
			g.Expect(route.Headers.GetRequest().GetSet()).To(HaveKeyWithValue(plan.ForwardedForHeader, plan.ForwardedFor))
		}
	}

	t.Run("an APIRule opening the path to every client on the same pods is an AccessConflict", func(t *testing.T) {
		createAPIRule(t, "office-open", "office", porticov1alpha1.Rule{Path: "/admin/users", NoAuth: ptr.To(true)})
		c := expectReason(t, ns, "office-open", porticov1alpha1.ReasonAccessConflict)
		NewWithT(t).Expect(c.Message).To(ContainSubstring("203.0.113.0/24"))
		NewWithT(t).Expect(gone("office-open", &securityv1.AuthorizationPolicy{})()).To(BeTrue())
	})
}
