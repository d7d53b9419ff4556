package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// forgedIdentityHeaders are what team-b would set on requests to team-a's
// consenting Service to be taken for someone else: a bearer token or a
// session, a client address or certificate, the claims a JWT filter or an
// external authorizer hands to a backend, a trace or request id, the host.
var forgedIdentityHeaders = map[string]gatewayv1alpha1.RequestHeaderValue{
	"authorization":           "Bearer forged",
	"proxy-authorization":     "Basic Zm9yZ2Vk",
	"cookie":                  "session=forged",
	"x-forwarded-for":         "10.0.0.1",
	"x-forwarded-client-cert": "By=spiffe://cluster.local/ns/team-a/sa/ledger",
	"forwarded":               "for=10.0.0.1",
	"x-real-ip":               "10.0.0.1",
	"x-jwt-payload":           "eyJzdWIiOiJhbGljZSJ9",
	"x-auth-request-user":     "alice",
	"x-ext-authz-check":       "allowed",
	"x-envoy-peer-metadata":   "forged",
	"x-istio-attributes":      "forged",
	"x-request-id":            "forged",
	"host":                    "ledger.a.example",
}

// Class 2 (forged identity): no APIRule sets a header that carries the
// caller's identity, the request's routing or its trace; the API server
// refuses it on create and on update, so nothing is ever written for it.
func TestNoAPIRuleForgesIdentityHeaders(t *testing.T) {
	protectLedger(t, "ledger-forge", teamB)
	for name, value := range forgedIdentityHeaders {
		t.Run("team-b setting "+name+" on team-a's consenting Service", func(t *testing.T) {
			t.Parallel()
			rule := noAuth("/*")
			rule.Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{name: value}}
			obj := apiRule(teamB, "forge-"+name, "forge-"+name+".b.example", publicGateway, backend(teamA, "ledger-forge"), rule)
			err := bob.Create(context.Background(), obj)
			g := NewWithT(t)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(Or(
				ContainSubstring("request.headers may not set a header that carries the caller's identity"),
				ContainSubstring("must be lower-case HTTP header names")))
		})
	}
	t.Run("team-b adding x-forwarded-for to an admitted APIRule", func(t *testing.T) {
		rule := noAuth("/*")
		rule.Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{"x-api-version": "2"}}
		obj := apiRule(teamB, "forge-update", "forge-update.b.example", publicGateway, backend(teamA, "ledger-forge"), rule)
		create(t, bob, obj)
		expectReason(t, obj, gatewayv1alpha1.ReasonApplied)
		g := NewWithT(t)
		g.Expect(bob.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		obj.Spec.Rules[0].Request.Headers["x-forwarded-for"] = "10.0.0.1"
		err := bob.Update(context.Background(), obj)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	})
	t.Run("team-b smuggling a header through a cookie value", func(t *testing.T) {
		rule := noAuth("/*")
		rule.Request = &gatewayv1alpha1.RequestModifier{Cookies: map[string]gatewayv1alpha1.CookieValue{"a": "1\r\nauthorization: Bearer forged"}}
		obj := apiRule(teamB, "forge-cookie", "forge-cookie.b.example", publicGateway, backend(teamA, "ledger-forge"), rule)
		err := bob.Create(context.Background(), obj)
		NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	})
	t.Run("team-b reading the gateway's own data through an Envoy command operator", func(t *testing.T) {
		rule := noAuth("/*")
		rule.Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{"x-peer": "%DOWNSTREAM_PEER_URI_SAN%"}}
		obj := apiRule(teamB, "forge-operator", "forge-operator.b.example", publicGateway, backend(teamA, "ledger-forge"), rule)
		err := bob.Create(context.Background(), obj)
		NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	})
}
