package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// withExtAuth makes the second rule (a prefix rule) an extAuth rule.
func withExtAuth(e *gatewayv1alpha1.ExtAuth) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].JWT, r.Spec.Rules[1].ExtAuth = nil, e }
}

func TestAPIRuleExtAuthValidation(t *testing.T) {
	one := func(names ...string) *gatewayv1alpha1.ExtAuth { return &gatewayv1alpha1.ExtAuth{Authorizers: names} }
	runRuleCases(t, map[string]ruleCase{
		"one authorizer":          {mutate: withExtAuth(one("ext-authz"))},
		"a hyphenated authorizer": {mutate: withExtAuth(one("ext-authz-grpc"))},
		// Istio refuses provider names that are not DNS labels and denies
		// the requests of a CUSTOM policy naming one (test/istio).
		"a dotted authorizer": {
			mutate:  withExtAuth(one("ext-authz.grpc")),
			wantErr: "authorizers[0] in body should match",
		},
		"with restrictions":    {mutate: withExtAuth(&gatewayv1alpha1.ExtAuth{Authorizers: []string{"ext-authz"}, Restrictions: severalIssuers()})},
		"with a single issuer": {mutate: withExtAuth(&gatewayv1alpha1.ExtAuth{Authorizers: []string{"ext-authz"}, Restrictions: largestJWTSingle(0)})},
		"no authorizer": {
			mutate:  withExtAuth(one()),
			wantErr: "authorizers: Required value",
		},
		"two authorizers": {
			mutate:  withExtAuth(one("a", "b")),
			wantErr: "must have at most 1 item",
		},
		"an authorizer that is not a name": {
			mutate:  withExtAuth(one("Ext Authz")),
			wantErr: "authorizers[0] in body should match",
		},
		"an authorizer beyond 63 characters": {
			mutate:  withExtAuth(one(strings.Repeat("a", 64))),
			wantErr: "may not be more than 63",
		},
		"extAuth and jwt": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].ExtAuth = one("ext-authz") },
			wantErr: "each rule needs exactly one of noAuth: true, jwt or extAuth",
		},
		"extAuth and noAuth": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withExtAuth(one("ext-authz"))(r)
				r.Spec.Rules[1].NoAuth = ptr.To(true)
			},
			wantErr: "each rule needs exactly one of noAuth: true, jwt or extAuth",
		},
		"restrictions checked as jwt": {
			mutate: withExtAuth(&gatewayv1alpha1.ExtAuth{Authorizers: []string{"ext-authz"},
				Restrictions: &gatewayv1alpha1.JWTAuthentication{Issuer: "https://idp.example.com", JWKSURI: "http://idp.example.com/keys"}}),
			wantErr: "jwksUri must be an https URL",
		},
	})
}

// kubectl explain documents extAuth: who grants an authorizer, Istio's
// single authorizer per workload, and what the restrictions add.
func TestKubectlExplainDocumentsExtAuth(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.rules.extAuth":              {"external authorizer", "action CUSTOM", "restrictions"},
		"apirules.spec.rules.extAuth.authorizers":  {"Exactly one", "a single provider per workload", "AuthorizerNotPermitted", "extAuthProviders", "a DNS label"},
		"apirules.spec.rules.extAuth.restrictions": {"the authorizer decides first"},
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
