package tenancy

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
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
		obj := apiRule(teamB, "forge-update", "forge-update.b.example", publicGateway, backend(teamA, "ledger-forge"), noAuth("/*"))
		create(t, bob, obj)
		expectReason(t, obj, gatewayv1alpha1.ReasonApplied)
		for _, name := range []string{"x-forwarded-for", "x_forwarded_for"} {
			g := NewWithT(t)
			g.Expect(bob.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			obj.Spec.Rules[0].Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{name: "10.0.0.1"}}
			err := bob.Update(context.Background(), obj)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", name, err)
		}
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

// forgedBySpelling are reserved headers spelled as backends read them:
// Envoy forwards names with '_' (headers_with_underscores_action ALLOW by
// default) and CGI, WSGI, Rack and PHP read '_' as '-' (PHP reads '.' as
// '_' too), so each arrives as the reserved header beside it.
var forgedBySpelling = map[string]gatewayv1alpha1.RequestHeaderValue{
	"x_forwarded_for":         "10.0.0.1",
	"x-forwarded_for":         "10.0.0.1",
	"x.forwarded.for":         "10.0.0.1",
	"x_forwarded_client_cert": "By=spiffe://cluster.local/ns/team-a/sa/ledger",
	"x_real_ip":               "10.0.0.1",
	"x_jwt_payload":           "eyJzdWIiOiJhbGljZSJ9",
	"x_auth_request_user":     "alice",
	"x_ext_authz_check":       "allowed",
	"proxy_authorization":     "Basic Zm9yZ2Vk",
	"x_envoy_peer_metadata":   "forged",
	"x_request_id":            "forged",
}

// Class 2 (forged identity) by another spelling: a reserved header is
// refused in every spelling a backend reads as it, on create, in the
// APIRule's own namespace as in another's, and two spellings of one header
// are refused as a duplicate.
func TestNoAPIRuleForgesIdentityHeadersByAnotherName(t *testing.T) {
	protectLedger(t, "ledger-spell", teamB)
	create(t, bob, service(teamB, "spell-own"))
	i := 0
	for name, value := range forgedBySpelling {
		for _, target := range []struct {
			where string
			svc   *gatewayv1alpha1.ServiceReference
		}{{"team-a's consenting Service", backend(teamA, "ledger-spell")}, {"its own Service", backend("", "spell-own")}} {
			i++
			id := fmt.Sprintf("spell-%d", i)
			t.Run("team-b setting "+name+" on "+target.where, func(t *testing.T) {
				t.Parallel()
				rule := noAuth("/*")
				rule.Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{name: value}}
				obj := apiRule(teamB, id, id+".b.example", publicGateway, target.svc, rule)
				err := bob.Create(context.Background(), obj)
				g := NewWithT(t)
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
				g.Expect(err.Error()).To(ContainSubstring("request.headers may not set a header that carries the caller's identity"))
			})
		}
	}
	t.Run("team-b setting x-user and x_user on its own Service", func(t *testing.T) {
		rule := noAuth("/*")
		rule.Request = &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{"x-user": "bob", "x_user": "alice"}}
		obj := apiRule(teamB, "spell-twice", "spell-twice.b.example", publicGateway, backend("", "spell-own"), rule)
		err := bob.Create(context.Background(), obj)
		g := NewWithT(t)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("request.headers names one header twice"))
	})
}

// Class 2 across namespaces: which headers and cookies carry identity is
// the backend's to say (a session cookie, an x-user its own proxy sets),
// and another namespace's owner cannot read the APIRule. So no rule that
// routes to another namespace's Service sets request headers or cookies:
// InvalidRule, and its objects are removed.
func TestNoCookieOrHeaderIntoAnotherNamespace(t *testing.T) {
	protectLedger(t, "ledger-cookie", teamB)
	create(t, bob, service(teamB, "cookie-own"))
	session := &gatewayv1alpha1.RequestModifier{Cookies: map[string]gatewayv1alpha1.CookieValue{"session": "forged"}}
	user := &gatewayv1alpha1.RequestModifier{Headers: map[string]gatewayv1alpha1.RequestHeaderValue{"x-user": "alice"}}
	with := func(rule gatewayv1alpha1.Rule, m *gatewayv1alpha1.RequestModifier) gatewayv1alpha1.Rule {
		rule.Request = m
		return rule
	}
	for i, attack := range []struct {
		name string
		rule gatewayv1alpha1.Rule
		svc  *gatewayv1alpha1.ServiceReference
	}{
		{"a session cookie", with(noAuth("/*"), session), backend(teamA, "ledger-cookie")},
		{"an x-user header", with(noAuth("/*"), user), backend(teamA, "ledger-cookie")},
		{"a session cookie through a split giving team-a's Service weight 0", with(split(noAuth("/*"),
			weighted(backend("", "cookie-own"), 100), weighted(backend(teamA, "ledger-cookie"), 0)), session), backend("", "cookie-own")},
	} {
		t.Run("team-b sending "+attack.name+" to team-a's consenting Service", func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("cookie-%d", i)
			obj := apiRule(teamB, id, id+".b.example", publicGateway, attack.svc, attack.rule)
			create(t, bob, obj)
			c := expectRefused(t, obj, gatewayv1alpha1.ReasonInvalidRule)
			NewWithT(t).Expect(c.Message).To(ContainSubstring("sets request headers or cookies, but routes to service team-a/ledger-cookie of another namespace"))
			g := NewWithT(t)
			g.Expect(writtenFor(g, obj)).To(BeEmpty())
		})
	}
	t.Run("team-b adding a session cookie to an Applied APIRule on team-a's Service", func(t *testing.T) {
		obj := apiRule(teamB, "cookie-update", "cookie-update.b.example", publicGateway, backend(teamA, "ledger-cookie"), noAuth("/*"))
		create(t, bob, obj)
		expectReason(t, obj, gatewayv1alpha1.ReasonApplied)
		update(t, bob, obj, func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Request = session })
		expectRefused(t, obj, gatewayv1alpha1.ReasonInvalidRule)
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(writtenFor(g, obj)).To(BeEmpty())
			g.Expect(route(g, publicGateway, "cookie-update.b.example", "/")).To(BeNil())
		}, eventually, poll).Should(Succeed(), "the APIRule's route is removed")
	})
	t.Run("team-b sending a session cookie to its own Service is Applied", func(t *testing.T) {
		obj := apiRule(teamB, "cookie-self", "cookie-self.b.example", publicGateway, backend("", "cookie-own"), with(noAuth("/*"), session))
		create(t, bob, obj)
		expectReason(t, obj, gatewayv1alpha1.ReasonApplied)
		g := NewWithT(t)
		r := route(g, publicGateway, "cookie-self.b.example", "/")
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.RequestHeaders).To(HaveKeyWithValue("cookie", "session=forged"))
	})
}

// rewrite is a noAuth prefix rule whose requests reach the backend at
// another path.
func rewrite(path string, rw gatewayv1alpha1.Rewrite) gatewayv1alpha1.Rule {
	rule := noAuth(path)
	rule.Rewrite = &rw
	return rule
}

// Class 3 (rewrites): the backend's access policy sees the rewritten path,
// so a rewrite is judged where it lands. No rewrite lets a request reach a
// path guarded on the workload without that path's authentication.
func TestNoRewriteOpensAGuardedPath(t *testing.T) {
	t.Run("team-a's noAuth /public/* rewritten into its own jwt /admin", func(t *testing.T) {
		t.Parallel()
		create(t, alice, service(teamA, "rewrite-self"))
		rule := apiRule(teamA, "rewrite-self", "rewrite-self.a.example", publicGateway, backend("", "rewrite-self"),
			jwt("/admin", issuerA, keysA), rewrite("/public/*", gatewayv1alpha1.Rewrite{Path: "/admin"}))
		create(t, alice, rule)
		t.Run("is refused with InvalidRule", func(t *testing.T) {
			c := expectRefused(t, rule, gatewayv1alpha1.ReasonInvalidRule)
			NewWithT(t).Expect(c.Message).To(ContainSubstring("rewrites to /admin"))
		})
		t.Run("writes nothing", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			g.Expect(writtenFor(g, rule)).To(BeEmpty())
		})
	})
	for i, rw := range []gatewayv1alpha1.Rewrite{{Path: "/admin"}, {Prefix: "/"}} {
		t.Run(fmt.Sprintf("a second APIRule in team-a rewriting /public/* to %s%s on the same workload", rw.Path, rw.Prefix), func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("ledger-rw-%d", i)
			ledger := protectLedger(t, name, "")
			rule := apiRule(teamA, name+"-second", name+"-second.a.example", publicGateway, backend("", name), rewrite("/public/*", rw))
			create(t, alice, rule)
			expectAccessConflict(t, rule, ledger)
		})
	}
	t.Run("team-b rewriting /public/* to /admin of team-a's consenting Service", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "ledger-rw-b", teamB)
		rule := apiRule(teamB, "rewrite-ledger", "ledger-rw-b.b.example", publicGateway, backend(teamA, "ledger-rw-b"),
			rewrite("/public/*", gatewayv1alpha1.Rewrite{Path: "/admin"}))
		create(t, bob, rule)
		t.Run("is Applied as a route", func(t *testing.T) { expectReason(t, rule, gatewayv1alpha1.ReasonApplied) })
		t.Run("writes no AuthorizationPolicy or RequestAuthentication in team-a", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			for _, obj := range writtenFor(g, rule) {
				g.Expect(obj).To(HavePrefix("VirtualService "+teamB+"/"), "team-b's APIRule wrote %s", obj)
			}
		})
		t.Run("a request through the rewrite reaches /admin only with team-a's token", func(t *testing.T) {
			awaitObserved(t, rule)
			g := NewWithT(t)
			r := route(g, publicGateway, "ledger-rw-b.b.example", "/public/x")
			g.Expect(r).NotTo(BeNil())
			g.Expect(destinationNamespaces(r)).To(ConsistOf(teamA))
			g.Expect(r.Path).To(Equal("/admin"))
			for _, tc := range []struct {
				token   *judge.Token
				allowed bool
			}{{nil, false}, {forgedA, false}, {tokenB, false}, {tokenA, true}} {
				req := judge.Request{Workload: ledger, Host: "ledger-rw-b.b.example", Path: r.Path, Method: "GET", Port: 8080, Token: tc.token}
				v := decide(g, req)
				g.Expect(v.Allowed()).To(Equal(tc.allowed), "%s: %s", req, v)
			}
		})
	})
}
