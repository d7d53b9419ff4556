package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// loginAuthorizer is the OIDC login proxy (oauth2-proxy) the administrator
// grants to team-a (docs/operations.md, "Login and API keys with external
// authorizers").
const loginAuthorizer = "oauth2-proxy"

// Class 3, login through a granted authorizer (threat model §21): team-a
// serves its app behind the login, with the login's own endpoints open on
// its host. team-b may not take the login over: not by naming the
// authorizer, not by routing a host of its own to team-a's login proxy
// (its callback would set team-a's session cookies on team-b's host), and
// not by setting the identity headers the login hands to backends, in any
// spelling.
func TestLoginAuthorizerStaysItsTenants(t *testing.T) {
	grantAuthorizer(t, loginAuthorizer, teamA)
	create(t, alice, service(teamA, "app"))
	proxy := service(teamA, "oauth2-proxy")
	create(t, alice, proxy)
	login := noAuth("/oauth2/*")
	login.Service = backend("", "oauth2-proxy")
	rule := apiRule(teamA, "app", "app.a.example", publicGateway, backend("", "app"), login, extAuth("/*", loginAuthorizer))
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
	app := judge.Workload{Namespace: teamA, Labels: service(teamA, "app").Spec.Selector}
	t.Run("team-a's login decides on its app and its endpoints are open", func(t *testing.T) {
		g := NewWithT(t)
		v := decide(g, judge.Request{Workload: app, Host: "app.a.example", Path: "/profile", Method: "GET", Port: 8080})
		g.Expect(v.Reason).To(ContainSubstring("CUSTOM policy"), "the login decides on /profile: %s", v)
		callback := judge.Request{Workload: judge.Workload{Namespace: teamA, Labels: proxy.Spec.Selector},
			Host: "app.a.example", Path: "/oauth2/callback", Method: "GET", Port: 8080}
		g.Expect(decide(g, callback).Allowed()).To(BeTrue(), "the callback is reachable without a session")
		// The authorizer's check of /profile is a request to the login
		// proxy's pods at /profile: the ALLOW policy Portico writes for the
		// /oauth2/* route refuses it there. Hence the provider is a second
		// Deployment that no APIRule routes to (docs/operations.md).
		check := callback
		check.Path = "/profile"
		g.Expect(decide(g, check).Allowed()).To(BeFalse(), "a check sent to the routed login proxy's pods is refused by its route's policy")
	})

	t.Run("team-b naming team-a's login", func(t *testing.T) {
		create(t, bob, service(teamB, "shop"))
		borrowed := apiRule(teamB, "shop", "shop.b.example", publicGateway, backend("", "shop"), extAuth("/*", loginAuthorizer))
		create(t, bob, borrowed)
		expectRefused(t, borrowed, gatewayv1alpha1.ReasonAuthorizerNotPermitted)
		awaitObserved(t, borrowed)
		g := NewWithT(t)
		g.Expect(writtenFor(g, borrowed)).To(BeEmpty())
	})

	t.Run("team-b routing its own host's /oauth2/ to team-a's login proxy", func(t *testing.T) {
		hijack := noAuth("/oauth2/*")
		hijack.Service = backend(teamA, "oauth2-proxy")
		stolen := apiRule(teamB, "stolen-login", "login.b.example", publicGateway, backend(teamA, "oauth2-proxy"), hijack)
		create(t, bob, stolen)
		expectRefused(t, stolen, gatewayv1alpha1.ReasonReferenceNotPermitted)
		awaitObserved(t, stolen)
		g := NewWithT(t)
		g.Expect(writtenFor(g, stolen)).To(BeEmpty())
	})

	// The headers oauth2-proxy hands to backends (set-xauthrequest and
	// set-authorization-header), in the spellings a backend may read as
	// the same name.
	for _, name := range []string{"x-auth-request-email", "x-auth-request-groups", "x_auth_request_user", "x.auth.request.preferred-username", "authorization"} {
		t.Run("team-b setting "+name+" on its own route", func(t *testing.T) {
			forged := noAuth("/*")
			forged.Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{name: "alice@a.example"}}
			obj := apiRule(teamB, "forge-login", "forge-login.b.example", publicGateway, backend("", "shop"), forged)
			err := bob.Create(context.Background(), obj)
			g := NewWithT(t)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		})
	}
}
