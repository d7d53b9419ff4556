package v1alpha1_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

type ruleCase struct {
	mutate  func(r *gatewayv1alpha1.APIRule)
	wantErr string
}

func runRuleCases(t *testing.T, tests map[string]ruleCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := validRule()
			tc.mutate(r)
			err := k8sClient.Create(context.Background(), r, client.DryRunAll)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func withRetries(p gatewayv1alpha1.RetryPolicy) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Retries = &p }
}

func TestAPIRuleRetriesValidation(t *testing.T) {
	onParent := func(mutate func(r *gatewayv1alpha1.APIRule)) func(r *gatewayv1alpha1.APIRule) {
		return func(r *gatewayv1alpha1.APIRule) {
			mutate(r)
			r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Name: "edge"}
		}
	}
	runRuleCases(t, map[string]ruleCase{
		"codes and conditions": {mutate: withRetries(gatewayv1alpha1.RetryPolicy{
			Attempts: 10, PerTryTimeout: duration(time.Second), Codes: []int32{400, 599},
			RetryOn: []gatewayv1alpha1.RetryCondition{"5xx", "gateway-error", "reset", "connect-failure", "refused-stream", "retriable-4xx"},
		})},
		"no attempts": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Codes: []int32{503}}),
			wantErr: "spec.rules[1].retries.attempts: Invalid value: 0: spec.rules[1].retries.attempts in body should be greater than or equal to 1",
		},
		"11 attempts": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 11, Codes: []int32{503}}),
			wantErr: "should be less than or equal to 10",
		},
		"nothing to retry on": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1}),
			wantErr: "retries needs codes, retryOn or both",
		},
		"a 3xx code": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{302}}),
			wantErr: "should be greater than or equal to 400",
		},
		"a list of conditions in one": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, RetryOn: []gatewayv1alpha1.RetryCondition{"5xx,reset"}}),
			wantErr: "Unsupported value",
		},
		"17 codes": {
			mutate: withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{
				500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 510, 511, 512, 513, 514, 515, 516}}),
			wantErr: "must have at most 16 items",
		},
		"per-try timeout beyond the rule's timeout": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(2 * time.Second)})(r)
				r.Spec.Rules[1].Timeout = duration(time.Second)
			},
			wantErr: "retries.perTryTimeout may not exceed the rule's timeout",
		},
		"per-try timeout beyond spec.timeout": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(2 * time.Second)})(r)
				r.Spec.Timeout = duration(time.Second)
			},
			wantErr: "retries.perTryTimeout may not exceed spec.timeout",
		},
		"per-try timeout beyond spec.timeout, within the rule's": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(2 * time.Second)})(r)
				r.Spec.Timeout, r.Spec.Rules[1].Timeout = duration(time.Second), duration(3*time.Second)
			},
		},
		"per-try timeout of 1.5ms": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(1500 * time.Microsecond)}),
			wantErr: "perTryTimeout must be a duration from 1ms to 1h in whole milliseconds",
		},
		"retries in HTTPRoute mode": {
			mutate:  onParent(withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}})),
			wantErr: "retries need Istio mode (gateway)",
		},
	})
}

func withRequest(m gatewayv1alpha1.RequestModifier) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Request = &m }
}

type headers = map[string]gatewayv1alpha1.RequestHeaderValue

type cookies = map[string]gatewayv1alpha1.CookieValue

func TestAPIRuleRequestValidation(t *testing.T) {
	many := func(n int) headers {
		h := headers{}
		for i := range n {
			h[fmt.Sprintf("x-h%d", i)] = "1"
		}
		return h
	}
	manyCookies := func(n int) cookies {
		c := cookies{}
		for i := range n {
			c[fmt.Sprintf("C%d", i)] = gatewayv1alpha1.CookieValue(strings.Repeat("v", 256))
		}
		return c
	}
	const reserved = "request.headers may not set a header that carries the caller's identity"
	tests := map[string]ruleCase{
		"8 headers of 512 characters, 8 cookies of 256": {mutate: func(r *gatewayv1alpha1.APIRule) {
			h := many(8)
			h["x-h0"] = gatewayv1alpha1.RequestHeaderValue(strings.Repeat("v", 512))
			withRequest(gatewayv1alpha1.RequestModifier{Headers: h, Cookies: manyCookies(8)})(r)
		}},
		"9 headers":  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: many(9)}), wantErr: "must have at most 8 items"},
		"9 cookies":  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Cookies: manyCookies(9)}), wantErr: "must have at most 8 items"},
		"upper case": {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"X-Api": "1"}}), wantErr: "must be lower-case HTTP header names"},
		"pseudo":     {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{":authority": "evil.example.com"}}), wantErr: "must be lower-case HTTP header names"},
		"name of 65": {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{strings.Repeat("x", 65): "1"}}), wantErr: "of at most 64 characters"},
		"value of 513": {
			mutate:  withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-a": gatewayv1alpha1.RequestHeaderValue(strings.Repeat("v", 513))}}),
			wantErr: "Too long: may not be more than 512",
		},
		"empty value":       {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-a": ""}}), wantErr: "should be at least 1 chars long"},
		"command operator":  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-peer": "%DOWNSTREAM_REMOTE_ADDRESS%"}}), wantErr: "printable ASCII without '%'"},
		"header injection":  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-a": "1\r\nx-forwarded-for: 1.2.3.4"}}), wantErr: "printable ASCII without '%'"},
		"inner spaces":      {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-a": "a b"}})},
		"trailing space":    {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-a": "a "}}), wantErr: "without spaces at either end"},
		"cookie with ';'":   {mutate: withRequest(gatewayv1alpha1.RequestModifier{Cookies: cookies{"a": "1;session=forged"}}), wantErr: "must be cookie characters"},
		"cookie with ']'":   {mutate: withRequest(gatewayv1alpha1.RequestModifier{Cookies: cookies{"a": "[x]"}})},
		"cookie with '\\'":  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Cookies: cookies{"a": `x\y`}}), wantErr: "must be cookie characters"},
		"cookie name =":     {mutate: withRequest(gatewayv1alpha1.RequestModifier{Cookies: cookies{"a=b": "1"}}), wantErr: "request.cookies names must be HTTP tokens"},
		"lookalike allowed": {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-forwarde": "1", "authorization-hint": "1"}})},
	}
	// Every reserved name and prefix of the Go lists, which the controller
	// checks too, is refused at admission: the CEL rule spells the same.
	for _, name := range gatewayv1alpha1.ReservedRequestHeaders {
		tests["reserved "+name] = ruleCase{mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{name: "forged"}}), wantErr: reserved}
	}
	for _, prefix := range gatewayv1alpha1.ReservedRequestHeaderPrefixes {
		tests["reserved "+prefix+"-x"] = ruleCase{mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{prefix + "-x": "forged"}}), wantErr: reserved}
	}
	// ... and in every spelling a backend reads as it: '_' or '.' for any
	// '-' (CGI, WSGI, Rack and PHP read x_forwarded_for as
	// X-Forwarded-For).
	for _, name := range reservedNames() {
		for _, spelling := range otherSpellings(name) {
			tests["reserved "+name+" spelled "+spelling] = ruleCase{mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{spelling: "forged"}}), wantErr: reserved}
		}
	}
	runRuleCases(t, tests)
}

// reservedNames are the reserved names and, for each reserved prefix, a
// name with it.
func reservedNames() []string {
	names := slices.Clone(gatewayv1alpha1.ReservedRequestHeaders)
	for _, prefix := range gatewayv1alpha1.ReservedRequestHeaderPrefixes {
		names = append(names, prefix+"-x")
	}
	return names
}

// otherSpellings are the spellings of a header name that backends read as
// it: every '-' as '_', every '-' as '.', and only the first as '_'.
func otherSpellings(name string) []string {
	if !strings.Contains(name, "-") {
		return nil
	}
	return slices.Compact([]string{
		strings.ReplaceAll(name, "-", "_"),
		strings.ReplaceAll(name, "-", "."),
		strings.Replace(name, "-", "_", 1),
	})
}

func TestAPIRuleRequestHeadersReadAsOne(t *testing.T) {
	const twice = "request.headers names one header twice"
	runRuleCases(t, map[string]ruleCase{
		"x-api and x_api":                  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-api": "1", "x_api": "2"}}), wantErr: twice},
		"x.tenant and x-tenant":            {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x.tenant": "1", "x-tenant": "2"}}), wantErr: twice},
		"x_a_b and x-a.b":                  {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x_a_b": "1", "x-a.b": "2"}}), wantErr: twice},
		"x-api and x-apis":                 {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x-api": "1", "x-apis": "2"}})},
		"an underscore name, not reserved": {mutate: withRequest(gatewayv1alpha1.RequestModifier{Headers: headers{"x_api_version": "2"}})},
	})
}

// One source of truth: the CRD's CEL rule that refuses reserved headers is
// exactly the rule built from the Go lists the controller checks with
// (ReservedRequestHeaders, ReservedRequestHeaderPrefixes), normalizing names
// as NormalizeHeaderName does. Adding a name to the Go lists without the
// rule, or the other way round, fails here.
func TestReservedRequestHeadersRuleIsTheGoList(t *testing.T) {
	g := NewWithT(t)
	var prefixes []string
	for _, p := range gatewayv1alpha1.ReservedRequestHeaderPrefixes {
		prefixes = append(prefixes, "!n.startsWith('"+p+"')")
	}
	want := fmt.Sprintf("self.all(k, [k.lowerAscii().replace('_', '-').replace('.', '-')].all(n, !(n in ['%s']) && %s))",
		strings.Join(gatewayv1alpha1.ReservedRequestHeaders, "','"), strings.Join(prefixes, " && "))

	var rules []string
	crds, err := testenv.ReadCRDs(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "gateway.portico.dev_apirules.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).To(HaveLen(1))
	for _, v := range crds[0].Spec.Versions {
		headers := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["rules"].Items.Schema.Properties["request"].Properties["headers"]
		for _, rule := range headers.XValidations {
			rules = append(rules, rule.Rule)
		}
	}
	g.Expect(rules).To(ContainElement(want), "the CEL rule on request.headers must be built from the Go lists")
	g.Expect(rules).To(ContainElement(ContainSubstring("self.all(k, self.exists_one(j, j.lowerAscii().replace('_', '-').replace('.', '-') == k.lowerAscii().replace('_', '-').replace('.', '-')))")),
		"the duplicate rule must normalize as the reserved rule does")
}

// NormalizeHeaderName is what the CEL rules spell: ASCII lower case, '_'
// and '.' as '-', nothing else folded.
func TestNormalizeHeaderName(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"x_forwarded_for": "x-forwarded-for", "X_Forwarded-For": "x-forwarded-for", "x.real.ip": "x-real-ip",
		"x-api": "x-api", "x~api": "x~api", "x+api": "x+api", "K": "k", "\u212a": "\u212a",
	} {
		g.Expect(gatewayv1alpha1.NormalizeHeaderName(in)).To(Equal(want), in)
	}
}

func TestReservedRequestHeaders(t *testing.T) {
	g := NewWithT(t)
	for name, want := range map[string]bool{
		"Authorization": true, "x-forwarded-for": true, "X-Envoy-Original-Path": true, "x-jwt-payload": true,
		"x-request-id": true, "x-custom": false, "authorization-hint": false,
		"x_forwarded_for": true, "X_Forwarded_For": true, "x.forwarded.for": true, "x-forwarded_for": true, "x_real_ip": true,
		"x_jwt_payload": true, "proxy_authorization": true, "x_envoy_peer_metadata": true, "x_api_version": false,
	} {
		g.Expect(gatewayv1alpha1.IsReservedRequestHeader(name)).To(Equal(want), name)
	}
}

func withRewrite(rw gatewayv1alpha1.Rewrite) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Rewrite = &rw }
}

func TestAPIRuleRewriteValidation(t *testing.T) {
	onExactRule := func(rw gatewayv1alpha1.Rewrite) func(r *gatewayv1alpha1.APIRule) {
		return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Rewrite = &rw }
	}
	runRuleCases(t, map[string]ruleCase{
		"prefix":                  {mutate: withRewrite(gatewayv1alpha1.Rewrite{Prefix: "/v2/orders/"})},
		"prefix /":                {mutate: withRewrite(gatewayv1alpha1.Rewrite{Prefix: "/"})},
		"whole path of a prefix":  {mutate: withRewrite(gatewayv1alpha1.Rewrite{Path: "/orders"})},
		"whole path of an exact":  {mutate: onExactRule(gatewayv1alpha1.Rewrite{Path: "/healthz"})},
		"prefix of an exact rule": {mutate: onExactRule(gatewayv1alpha1.Rewrite{Prefix: "/v2/"}), wantErr: "rewrite.prefix needs a prefix rule"},
		"neither":                 {mutate: withRewrite(gatewayv1alpha1.Rewrite{}), wantErr: "rewrite needs exactly one of path"},
		"both": {
			mutate:  withRewrite(gatewayv1alpha1.Rewrite{Path: "/a", Prefix: "/b/"}),
			wantErr: "rewrite needs exactly one of path",
		},
		"prefix without final slash": {mutate: withRewrite(gatewayv1alpha1.Rewrite{Prefix: "/v2"}), wantErr: "rewrite.prefix must end with '/'"},
		"wildcard":                   {mutate: withRewrite(gatewayv1alpha1.Rewrite{Path: "/admin/*"}), wantErr: "without '*', '%', '?' or '#'"},
		"percent":                    {mutate: withRewrite(gatewayv1alpha1.Rewrite{Prefix: "/a%2fadmin/"}), wantErr: "without '*', '%', '?' or '#'"},
		"query":                      {mutate: withRewrite(gatewayv1alpha1.Rewrite{Path: "/a?admin=1"}), wantErr: "without '*', '%', '?' or '#'"},
		"relative":                   {mutate: withRewrite(gatewayv1alpha1.Rewrite{Path: "admin"}), wantErr: "a rewrite must start with '/'"},
		"dot segment":                {mutate: withRewrite(gatewayv1alpha1.Rewrite{Prefix: "/public/../admin/"}), wantErr: "may not have empty or dot segments"},
		"final dot segment":          {mutate: withRewrite(gatewayv1alpha1.Rewrite{Path: "/public/.."}), wantErr: "may not have empty or dot segments"},
		"empty segment":              {mutate: withRewrite(gatewayv1alpha1.Rewrite{Prefix: "//admin/"}), wantErr: "may not have empty or dot segments"},
		"257 characters": {
			mutate:  withRewrite(gatewayv1alpha1.Rewrite{Path: gatewayv1alpha1.RewritePath("/" + strings.Repeat("p", 256))}),
			wantErr: "may not be more than 256",
		},
	})
}
