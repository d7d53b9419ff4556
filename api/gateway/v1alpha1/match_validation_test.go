package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func withMatch(m gatewayv1alpha1.RequestMatch) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Match = &m }
}

func headerMatch(name, exact string) gatewayv1alpha1.RuleHeaderMatch {
	return gatewayv1alpha1.RuleHeaderMatch{Name: name, Exact: exact}
}

// withHealthTwin adds a rule on /health GET, validRule's noAuth rule.
func withHealthTwin(twin gatewayv1alpha1.Rule) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) {
		twin.Path, twin.Methods = "/health", []gatewayv1alpha1.HTTPMethod{"GET"}
		r.Spec.Rules = append(r.Spec.Rules, twin)
	}
}

func TestAPIRuleMatchValidation(t *testing.T) {
	beta := &gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("x-beta", "1")}}
	eight := make([]gatewayv1alpha1.RuleHeaderMatch, 8)
	for i := range eight {
		eight[i] = gatewayv1alpha1.RuleHeaderMatch{Name: "x-" + strings.Repeat("h", 125) + string(rune('a'+i)), Regex: strings.Repeat("~", 256)}
	}
	runRuleCases(t, map[string]ruleCase{
		"every kind of match at its bounds": {mutate: withMatch(gatewayv1alpha1.RequestMatch{
			Headers: []gatewayv1alpha1.RuleHeaderMatch{
				{Name: "x-beta", Exact: "on with spaces inside"}, {Name: "user-agent", Prefix: "curl/"}, {Name: "x-tenant", Regex: "team-[a-z]+"},
			},
			QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "version", Exact: "v2"}, {Name: "debug", Regex: "(true|1)"}},
		})},
		"8 headers of 128 characters with 256-character values": {mutate: withMatch(gatewayv1alpha1.RequestMatch{Headers: eight})},
		"9 matches in all": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: eight, QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "v", Exact: "2"}}}),
			wantErr: "a rule matches at most 8 headers and query parameters in all",
		},
		"empty match": {mutate: withMatch(gatewayv1alpha1.RequestMatch{}), wantErr: "match needs headers, queryParams or both"},
		"header with two kinds": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{{Name: "x-beta", Exact: "1", Regex: "1"}}}),
			wantErr: "a header match needs exactly one of exact, prefix or regex",
		},
		"header with no value": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{{Name: "x-beta"}}}),
			wantErr: "a header match needs exactly one of exact, prefix or regex",
		},
		"upper-case header name": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("X-Beta", "1")}}),
			wantErr: "spec.rules[1].match.headers[0].name in body should match",
		},
		"pseudo-header": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch(":authority", "a")}}),
			wantErr: "spec.rules[1].match.headers[0].name in body should match",
		},
		"a header Istio ignores": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("host", "a.example.com")}}),
			wantErr: "a header match may not name uri, scheme, method, authority or host",
		},
		"header value with a control character": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("x-beta", "1\r\nx-admin: yes")}}),
			wantErr: "spec.rules[1].match.headers[0].exact in body should match",
		},
		"header value too long": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("x-beta", strings.Repeat("a", 257))}}),
			wantErr: "Too long: may not be more than 256",
		},
		"the same header twice": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("x-beta", "1"), headerMatch("x-beta", "2")}}),
			wantErr: "Duplicate value",
		},
		"query parameter by prefix": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "v", Prefix: "2"}}}),
			wantErr: "a query parameter cannot be matched by prefix",
		},
		"query parameter with two kinds": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "v", Exact: "2", Regex: "2"}}}),
			wantErr: "a query parameter match needs exactly one of exact or regex",
		},
		"percent-encoded query value": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "v", Exact: "%32"}}}),
			wantErr: "spec.rules[1].match.queryParams[0].exact in body should match",
		},
		"query name with '='": {
			mutate:  withMatch(gatewayv1alpha1.RequestMatch{QueryParams: []gatewayv1alpha1.RuleQueryParamMatch{{Name: "a=b", Exact: "2"}}}),
			wantErr: "spec.rules[1].match.queryParams[0].name in body should match",
		},
		"same path and method, different matches, same authentication": {
			mutate: withHealthTwin(gatewayv1alpha1.Rule{NoAuth: ptr.To(true), Match: beta}),
		},
		"same path and method, same authentication, neither matched": {
			mutate:  withHealthTwin(gatewayv1alpha1.Rule{NoAuth: ptr.To(true)}),
			wantErr: "two rules have the same path and a method in common, and neither has a match",
		},
		"a header match may not open a guarded path": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[0].NoAuth, r.Spec.Rules[0].JWT = nil, r.Spec.Rules[1].JWT
				withHealthTwin(gatewayv1alpha1.Rule{NoAuth: ptr.To(true), Match: &gatewayv1alpha1.RequestMatch{
					Headers: []gatewayv1alpha1.RuleHeaderMatch{headerMatch("x-admin", "yes")},
				}})(r)
			},
			wantErr: "a match selects a route, not access",
		},
		"a header match on another service may differ": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[0].NoAuth, r.Spec.Rules[0].JWT = nil, r.Spec.Rules[1].JWT
				withHealthTwin(gatewayv1alpha1.Rule{NoAuth: ptr.To(true), Match: beta,
					Service: &gatewayv1alpha1.ServiceReference{Name: "orders-beta", Port: 8080}})(r)
			},
		},
		"a matched prefix rule may not open the path it covers": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true), Match: beta})
			},
			wantErr: "a rule with match shares its path",
		},
	})
}

// kubectl explain documents matching: bounds, and that a match selects a
// route, never access.
func TestKubectlExplainDocumentsMatch(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.rules.match":                   {"selects a route, never access", "same authentication", "at most 8 in all"},
		"apirules.spec.rules.match.headers":           {"exactly, by prefix or by an RE2", "at most 128"},
		"apirules.spec.rules.match.headers.regex":     {"InvalidRule", "too large for Envoy"},
		"apirules.spec.rules.match.queryParams":       {"no prefix", "without percent-decoding"},
		"apirules.spec.rules.match.queryParams.exact": {"URL-safe"},
	} {
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			out = strings.Join(strings.Fields(out), " ")
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
