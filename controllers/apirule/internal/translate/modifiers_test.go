package translate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func ms(n int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(n) * time.Millisecond}
}

func TestRetries(t *testing.T) {
	tests := map[string]struct {
		policy      *porticov1alpha1.RetryPolicy
		ruleTimeout *metav1.Duration
		specTimeout *metav1.Duration
		wantRetryOn string
		wantErr     string
	}{
		"codes only": {
			policy:      &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503, 502, 503}},
			wantRetryOn: "502,503",
		},
		"conditions first, sorted, then codes": {
			policy:      &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{504}, RetryOn: []porticov1alpha1.RetryCondition{"reset", "5xx"}},
			wantRetryOn: "5xx,reset,504",
		},
		"per-try timeout within the rule's timeout": {
			policy:      &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: ms(500)},
			ruleTimeout: ms(500), specTimeout: ms(100), wantRetryOn: "503",
		},
		"per-try timeout beyond the rule's timeout": {
			policy:      &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: ms(501)},
			ruleTimeout: ms(500), wantErr: "exceeds the timeout",
		},
		"per-try timeout beyond spec.timeout": {
			policy:      &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: ms(2000)},
			specTimeout: ms(1000), wantErr: "exceeds the timeout",
		},
		"no attempts": {
			policy: &porticov1alpha1.RetryPolicy{Codes: []int32{503}}, wantErr: "attempts must be from 1 to 10",
		},
		"11 attempts": {
			policy: &porticov1alpha1.RetryPolicy{Attempts: 11, Codes: []int32{503}}, wantErr: "attempts must be from 1 to 10",
		},
		"nothing to retry on": {
			policy: &porticov1alpha1.RetryPolicy{Attempts: 1}, wantErr: "needs codes, retryOn or both",
		},
		"a code out of range": {
			policy: &porticov1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{200}}, wantErr: "not from 400 to 599",
		},
		"an unknown condition": {
			policy:  &porticov1alpha1.RetryPolicy{Attempts: 1, RetryOn: []porticov1alpha1.RetryCondition{"5xx,reset"}},
			wantErr: "is not one of",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(withRules(porticov1alpha1.Rule{Path: "/orders/*", NoAuth: ptr.To(true), Timeout: tc.ruleTimeout, Retries: tc.policy}))
			r.Spec.Timeout = tc.specTimeout
			out, err := Translate(Input{APIRule: r, Selectors: selectors})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got := out.VirtualService.Spec.Http[0].Retries
			g.Expect(got.Attempts).To(Equal(tc.policy.Attempts))
			g.Expect(got.RetryOn).To(Equal(tc.wantRetryOn))
		})
	}
}

func TestHTTPRouteModeRefusesRetries(t *testing.T) {
	r := newAPIRule(withRules(porticov1alpha1.Rule{Path: "/orders/*", NoAuth: ptr.To(true),
		Retries: &porticov1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}}}))
	r.Spec.Gateway, r.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "edge"}
	_, err := Translate(Input{APIRule: r, Selectors: selectors, Parent: Parent(r)})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("retries, which need Istio mode")))
}

func TestRequestHeadersAndCookies(t *testing.T) {
	type headers = map[string]porticov1alpha1.RequestHeaderValue
	type cookies = map[string]porticov1alpha1.CookieValue
	tests := map[string]struct {
		request *porticov1alpha1.RequestModifier
		want    map[string]string
		wantErr string
	}{
		"headers and cookies, the cookies in one header sorted by name": {
			request: &porticov1alpha1.RequestModifier{Headers: headers{"x-a": "1"}, Cookies: cookies{"z": "2", "b": "3"}},
			want:    map[string]string{"x-a": "1", "cookie": "b=3; z=2"},
		},
		"nothing": {request: &porticov1alpha1.RequestModifier{}},
		// Defence in depth: what admission refuses, the controller refuses.
		"authorization":      {request: &porticov1alpha1.RequestModifier{Headers: headers{"authorization": "Bearer forged"}}, wantErr: "may not set the header authorization"},
		"x-forwarded-for":    {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-forwarded-for": "10.0.0.1"}}, wantErr: "may not set the header x-forwarded-for"},
		"upper-case JWT out": {request: &porticov1alpha1.RequestModifier{Headers: headers{"X-Jwt-Payload": "e30"}}, wantErr: "may not set the header X-Jwt-Payload"},
		"cookie as a header": {request: &porticov1alpha1.RequestModifier{Headers: headers{"cookie": "session=forged"}}, wantErr: "may not set the header cookie"},
		"upper-case name":    {request: &porticov1alpha1.RequestModifier{Headers: headers{"X-Custom": "1"}}, wantErr: "not one the APIRule may set"},
		"pseudo-header":      {request: &porticov1alpha1.RequestModifier{Headers: headers{":authority": "evil"}}, wantErr: "not one the APIRule may set"},
		"command operator":   {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-peer": "%DOWNSTREAM_REMOTE_ADDRESS%"}}, wantErr: "not one the APIRule may set"},
		"CRLF in a value":    {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-a": "1\r\nauthorization: forged"}}, wantErr: "not one the APIRule may set"},
		"513 characters":     {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-a": porticov1alpha1.RequestHeaderValue(strings.Repeat("v", 513))}}, wantErr: "not one the APIRule may set"},
		"512 characters": {
			request: &porticov1alpha1.RequestModifier{Headers: headers{"x-a": porticov1alpha1.RequestHeaderValue(strings.Repeat("v", 512))}},
			want:    map[string]string{"x-a": strings.Repeat("v", 512)},
		},
		// A reserved name in any spelling a backend reads as it: CGI, WSGI,
		// Rack and PHP read x_forwarded_for as X-Forwarded-For, PHP reads
		// '.' as '_' too.
		"x_forwarded_for":     {request: &porticov1alpha1.RequestModifier{Headers: headers{"x_forwarded_for": "10.0.0.1"}}, wantErr: "may not set the header x_forwarded_for, which backends read as x-forwarded-for"},
		"X_Forwarded_For":     {request: &porticov1alpha1.RequestModifier{Headers: headers{"X_Forwarded_For": "10.0.0.1"}}, wantErr: "may not set the header X_Forwarded_For"},
		"x-forwarded_for":     {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-forwarded_for": "10.0.0.1"}}, wantErr: "which backends read as x-forwarded-for"},
		"x.real.ip":           {request: &porticov1alpha1.RequestModifier{Headers: headers{"x.real.ip": "10.0.0.1"}}, wantErr: "which backends read as x-real-ip"},
		"x_jwt_payload":       {request: &porticov1alpha1.RequestModifier{Headers: headers{"x_jwt_payload": "e30"}}, wantErr: "which backends read as x-jwt-payload"},
		"x_auth_request_user": {request: &porticov1alpha1.RequestModifier{Headers: headers{"x_auth_request_user": "alice"}}, wantErr: "which backends read as x-auth-request-user"},
		"proxy_authorization": {request: &porticov1alpha1.RequestModifier{Headers: headers{"proxy_authorization": "Basic Zm9yZ2Vk"}}, wantErr: "which backends read as proxy-authorization"},
		"content_length":      {request: &porticov1alpha1.RequestModifier{Headers: headers{"content_length": "0"}}, wantErr: "which backends read as content-length"},
		"an underscore name that is not reserved": {
			request: &porticov1alpha1.RequestModifier{Headers: headers{"x_api_version": "2"}},
			want:    map[string]string{"x_api_version": "2"},
		},
		"two names a backend reads as one": {
			request: &porticov1alpha1.RequestModifier{Headers: headers{"x-api": "1", "x_api": "2"}},
			wantErr: "sets the headers x-api and x_api, which backends read as one header (x-api)",
		},
		"a dot and a dash": {
			request: &porticov1alpha1.RequestModifier{Headers: headers{"x.tenant": "1", "x-tenant": "2"}},
			wantErr: "which backends read as one header (x-tenant)",
		},
		"a cookie value with ';'": {request: &porticov1alpha1.RequestModifier{Cookies: cookies{"a": "1; session=forged"}}, wantErr: "cookie \"a\""},
		"9 headers": {request: &porticov1alpha1.RequestModifier{Headers: func() headers {
			h := headers{}
			for i := range 9 {
				h[fmt.Sprintf("x-h%d", i)] = "1"
			}
			return h
		}()}, wantErr: "at most 8"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(withRules(porticov1alpha1.Rule{Path: "/orders/*", NoAuth: ptr.To(true), Request: tc.request}))
			out, err := Translate(Input{APIRule: r, Selectors: selectors})
			onGateway := r.DeepCopy()
			onGateway.Spec.Gateway, onGateway.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "edge"}
			routeOut, routeErr := Translate(Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(routeErr).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(routeErr).NotTo(HaveOccurred())
			got := out.VirtualService.Spec.Http[0].GetHeaders().GetRequest().GetSet()
			if len(tc.want) == 0 {
				g.Expect(got).To(BeEmpty())
				g.Expect(routeOut.HTTPRoute.Spec.Rules[0].Filters).To(BeEmpty())
				return
			}
			g.Expect(got).To(Equal(tc.want))
			filters := routeOut.HTTPRoute.Spec.Rules[0].Filters
			g.Expect(filters).To(HaveLen(1))
			fromRoute := map[string]string{}
			for _, h := range filters[0].RequestHeaderModifier.Set {
				fromRoute[string(h.Name)] = h.Value
			}
			g.Expect(fromRoute).To(Equal(tc.want))
		})
	}
}

func TestRewriteTargets(t *testing.T) {
	admin := func(path string) porticov1alpha1.Rule {
		return porticov1alpha1.Rule{Path: path, JWT: jwt("https://admin-idp.example.com", nil, nil)}
	}
	open := func(path string, rw porticov1alpha1.Rewrite, methods ...porticov1alpha1.HTTPMethod) porticov1alpha1.Rule {
		return porticov1alpha1.Rule{Path: path, Methods: methods, NoAuth: ptr.To(true), Rewrite: &rw}
	}
	on := func(svc string, rule porticov1alpha1.Rule) porticov1alpha1.Rule {
		rule.Service = &porticov1alpha1.ServiceReference{Name: svc, Port: 8080}
		return rule
	}
	tests := map[string]struct {
		rules   []porticov1alpha1.Rule
		wantErr string
	}{
		"noAuth prefix rewritten into a jwt prefix": {
			rules:   []porticov1alpha1.Rule{admin("/admin/*"), open("/public/*", porticov1alpha1.Rewrite{Prefix: "/admin/"})},
			wantErr: "rule /public/* (noAuth) rewrites to /admin/*, which meets /admin/* that rule /admin/* (jwt issuer https://admin-idp.example.com) allows",
		},
		"noAuth prefix rewritten under a jwt prefix": {
			rules:   []porticov1alpha1.Rule{admin("/admin/*"), open("/public/*", porticov1alpha1.Rewrite{Prefix: "/admin/users/"})},
			wantErr: "rewrites to /admin/users/*",
		},
		"noAuth prefix rewritten above a jwt exact path": {
			rules:   []porticov1alpha1.Rule{admin("/admin/keys"), open("/public/*", porticov1alpha1.Rewrite{Prefix: "/"})},
			wantErr: "rewrites to /*, which meets /admin/keys",
		},
		"noAuth exact path rewritten onto a jwt exact path": {
			rules:   []porticov1alpha1.Rule{admin("/admin"), open("/status", porticov1alpha1.Rewrite{Path: "/admin"})},
			wantErr: "rewrites to /admin, which meets /admin",
		},
		"noAuth prefix's whole path onto a jwt path": {
			rules:   []porticov1alpha1.Rule{admin("/admin/*"), open("/old/*", porticov1alpha1.Rewrite{Path: "/admin/x"})},
			wantErr: "rewrites to /admin/x",
		},
		"onto a Service selecting the same pods": {
			rules:   []porticov1alpha1.Rule{admin("/admin/*"), on("orders-admin", open("/public/*", porticov1alpha1.Rewrite{Prefix: "/admin/"}))},
			wantErr: "on the pods of service shop/orders",
		},
		"a jwt rule rewritten into a noAuth path is refused too": {
			rules: []porticov1alpha1.Rule{
				{Path: "/health", NoAuth: ptr.To(true)},
				{Path: "/admin/*", JWT: jwt("https://admin-idp.example.com", nil, nil), Rewrite: &porticov1alpha1.Rewrite{Path: "/health"}},
			},
			wantErr: "rule /admin/* (jwt issuer https://admin-idp.example.com) rewrites to /health",
		},
		"disjoint methods": {
			rules: []porticov1alpha1.Rule{
				{Path: "/admin/*", Methods: []porticov1alpha1.HTTPMethod{"POST"}, JWT: jwt("https://admin-idp.example.com", nil, nil)},
				open("/public/*", porticov1alpha1.Rewrite{Prefix: "/admin/"}, "GET"),
			},
		},
		"other pods":          {rules: []porticov1alpha1.Rule{admin("/admin/*"), on("reports", open("/public/*", porticov1alpha1.Rewrite{Prefix: "/admin/"}))}},
		"a sibling path":      {rules: []porticov1alpha1.Rule{admin("/admin/*"), open("/public/*", porticov1alpha1.Rewrite{Prefix: "/adminx/"})}},
		"same authentication": {rules: []porticov1alpha1.Rule{admin("/admin/*"), {Path: "/a/*", JWT: jwt("https://admin-idp.example.com", nil, nil), Rewrite: &porticov1alpha1.Rewrite{Prefix: "/admin/"}}}},
		"a rewrite away from a guarded client path": {
			// /admin/* is guarded by its client path; the rewrite goes to /v2/admin/.
			rules: []porticov1alpha1.Rule{admin("/admin/*"), {Path: "/v1/*", NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Prefix: "/v2/"}}},
		},
		"prefix rewrite on an exact rule": {
			rules:   []porticov1alpha1.Rule{open("/status", porticov1alpha1.Rewrite{Prefix: "/health/"})},
			wantErr: "needs a prefix rule",
		},
		"both path and prefix": {
			rules:   []porticov1alpha1.Rule{open("/s/*", porticov1alpha1.Rewrite{Path: "/a", Prefix: "/b/"})},
			wantErr: "exactly one of path or prefix",
		},
		"a dot segment": {
			rules:   []porticov1alpha1.Rule{open("/s/*", porticov1alpha1.Rewrite{Prefix: "/public/../admin/"})},
			wantErr: "without '*', '%' or dot segments",
		},
		"an encoded slash": {
			rules:   []porticov1alpha1.Rule{open("/s/*", porticov1alpha1.Rewrite{Prefix: "/public%2f..%2fadmin/"})},
			wantErr: "without '*', '%' or dot segments",
		},
		"a wildcard": {
			rules:   []porticov1alpha1.Rule{open("/s/*", porticov1alpha1.Rewrite{Path: "/admin/*"})},
			wantErr: "without '*', '%' or dot segments",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(withRules(tc.rules...))
			_, err := Translate(Input{APIRule: r, Selectors: selectors})
			onGateway := r.DeepCopy()
			onGateway.Spec.Gateway, onGateway.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "edge"}
			_, routeErr := Translate(Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(routeErr).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(routeErr).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestBackendPath(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		rule porticov1alpha1.Rule
		want string
	}{
		{porticov1alpha1.Rule{Path: "/orders/*"}, "/orders/*"},
		{porticov1alpha1.Rule{Path: "/orders/*", Rewrite: &porticov1alpha1.Rewrite{Prefix: "/v2/"}}, "/v2/*"},
		{porticov1alpha1.Rule{Path: "/orders/*", Rewrite: &porticov1alpha1.Rewrite{Prefix: "/"}}, "/*"},
		{porticov1alpha1.Rule{Path: "/orders/*", Rewrite: &porticov1alpha1.Rewrite{Path: "/all"}}, "/all"},
		{porticov1alpha1.Rule{Path: "/status", Rewrite: &porticov1alpha1.Rewrite{Path: "/health"}}, "/health"},
	} {
		g.Expect(BackendPath(tc.rule)).To(Equal(tc.want), "%+v", tc.rule)
	}
}

// Headers and cookies go only to Services of the APIRule's own namespace:
// another namespace's owner cannot read the APIRule, so cannot know what is
// sent to its Service in its callers' name. Every backend of the rule
// counts, whatever its weight, and so does spec.service for rules without
// their own.
func TestRequestHeadersAndCookiesStayInTheNamespace(t *testing.T) {
	type headers = map[string]porticov1alpha1.RequestHeaderValue
	type cookies = map[string]porticov1alpha1.CookieValue
	session := &porticov1alpha1.RequestModifier{Cookies: cookies{"session": "forged"}}
	version := &porticov1alpha1.RequestModifier{Headers: headers{"x-api-version": "2"}}
	analytics := &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 8080}
	const refused = "sets request headers or cookies, but routes to service analytics/reports of another namespace"
	for name, tc := range map[string]struct {
		rule        porticov1alpha1.Rule
		specService *porticov1alpha1.ServiceReference
		wantErr     string
	}{
		"a cookie to another namespace's Service": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Service: analytics, Request: session}, wantErr: refused,
		},
		"a header to another namespace's Service": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Service: analytics, Request: version}, wantErr: refused,
		},
		"a header through spec.service in another namespace": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Request: version}, specService: analytics, wantErr: refused,
		},
		"a cookie to a split with a weight-0 backend in another namespace": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Request: session,
				Backends: split(weighted("orders", "", 100), weighted("reports", "analytics", 0))},
			wantErr: refused,
		},
		"a cookie to the own namespace, named explicitly": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Request: session,
				Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "shop", Port: 8080}},
		},
		"headers and cookies to a split within the namespace": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true),
				Request:  &porticov1alpha1.RequestModifier{Headers: headers{"x-api-version": "2"}, Cookies: cookies{"session": "s"}},
				Backends: split(weighted("orders", "", 90), weighted("orders-v2", "shop", 10))},
		},
		"no headers or cookies to another namespace's Service": {
			rule: porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Service: analytics, Request: &porticov1alpha1.RequestModifier{}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(withRules(tc.rule))
			if tc.specService != nil {
				r.Spec.Service = tc.specService
			}
			onGateway := r.DeepCopy()
			onGateway.Spec.Gateway, onGateway.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "edge"}
			_, err := Translate(Input{APIRule: r, Selectors: selectors})
			_, routeErr := Translate(Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(routeErr).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(routeErr).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(err).To(MatchError(ErrForgesRequest), "the controller removes the live objects")
		})
	}
}

// The refusals of headers and cookies sent in the callers' name are
// ErrForgesRequest, on which the controller removes the live objects (an
// APIRule Applied before the check must not keep its route); other
// refusals of request modifiers are not.
func TestForgedRequestRefusalsWithdraw(t *testing.T) {
	type headers = map[string]porticov1alpha1.RequestHeaderValue
	for name, tc := range map[string]struct {
		request  *porticov1alpha1.RequestModifier
		withdraw bool
	}{
		"a reserved header":                 {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-forwarded-for": "10.0.0.1"}}, withdraw: true},
		"a reserved header by another name": {request: &porticov1alpha1.RequestModifier{Headers: headers{"x_forwarded_for": "10.0.0.1"}}, withdraw: true},
		"two headers read as one":           {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-user": "a", "x_user": "b"}}, withdraw: true},
		"a header value with a command":     {request: &porticov1alpha1.RequestModifier{Headers: headers{"x-a": "%START_TIME%"}}},
		"an upper-case name, not reserved":  {request: &porticov1alpha1.RequestModifier{Headers: headers{"X-A": "1"}}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Translate(Input{APIRule: newAPIRule(withRules(porticov1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true), Request: tc.request})), Selectors: selectors})
			g.Expect(err).To(HaveOccurred())
			g.Expect(errors.Is(err, ErrForgesRequest)).To(Equal(tc.withdraw), "%v", err)
		})
	}
}
