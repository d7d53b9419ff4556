package explain

import (
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	issuerA = "https://idp.team-a.example"
	keysA   = "https://idp.team-a.example/jwks.json"
	keysB   = "https://keys.team-b.example/jwks.json"
)

var (
	ledger = Workload{Namespace: "team-a", Labels: map[string]string{"app": "ledger", "version": "v1"}}
	// tokenA is signed with team-a's key set.
	tokenA = &Token{Issuer: issuerA, KeySet: keysA, Subject: "alice", Audiences: []string{"ledger"}, Scopes: []string{"read", "admin"}}
	// forged claims team-a's issuer but is signed with team-b's keys.
	forged = &Token{Issuer: issuerA, KeySet: keysB, Subject: "mallory", Audiences: []string{"ledger"}, Scopes: []string{"admin"}}
)

type ruleOption func(*securityv1beta1.Rule)

func rule(opts ...ruleOption) *securityv1beta1.Rule {
	r := &securityv1beta1.Rule{}
	for _, o := range opts {
		o(r)
	}
	return r
}

func to(op *securityv1beta1.Operation) ruleOption {
	return func(r *securityv1beta1.Rule) { r.To = append(r.To, &securityv1beta1.Rule_To{Operation: op}) }
}

func paths(p ...string) ruleOption { return to(&securityv1beta1.Operation{Paths: p}) }

func from(src *securityv1beta1.Source) ruleOption {
	return func(r *securityv1beta1.Rule) { r.From = append(r.From, &securityv1beta1.Rule_From{Source: src}) }
}

func requestPrincipals(p ...string) ruleOption {
	return from(&securityv1beta1.Source{RequestPrincipals: p})
}

func when(key string, values ...string) ruleOption {
	return func(r *securityv1beta1.Rule) {
		r.When = append(r.When, &securityv1beta1.Condition{Key: key, Values: values})
	}
}

func whenNot(key string, values ...string) ruleOption {
	return func(r *securityv1beta1.Rule) {
		r.When = append(r.When, &securityv1beta1.Condition{Key: key, NotValues: values})
	}
}

// jwtProtected is what the apirule controller writes for a jwt rule.
func jwtProtected(path, issuer string) *securityv1beta1.Rule {
	return rule(paths(path), requestPrincipals(issuer+"/*"), when("request.auth.claims[iss]", issuer))
}

func policy(ns, name string, action securityv1beta1.AuthorizationPolicy_Action, selector map[string]string, rules ...*securityv1beta1.Rule) *securityv1.AuthorizationPolicy {
	ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if selector != nil {
		ap.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: selector}
	}
	ap.Spec.Action = action
	ap.Spec.Rules = rules
	return ap
}

func allow(ns, name string, selector map[string]string, rules ...*securityv1beta1.Rule) *securityv1.AuthorizationPolicy {
	return policy(ns, name, securityv1beta1.AuthorizationPolicy_ALLOW, selector, rules...)
}

func deny(ns, name string, selector map[string]string, rules ...*securityv1beta1.Rule) *securityv1.AuthorizationPolicy {
	return policy(ns, name, securityv1beta1.AuthorizationPolicy_DENY, selector, rules...)
}

func requestAuthentication(ns, name string, selector map[string]string, rules ...*securityv1beta1.JWTRule) *securityv1.RequestAuthentication {
	ra := &securityv1.RequestAuthentication{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if selector != nil {
		ra.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: selector}
	}
	ra.Spec.JwtRules = rules
	return ra
}

func jwtRule(issuer, jwksURI string, audiences ...string) *securityv1beta1.JWTRule {
	return &securityv1beta1.JWTRule{Issuer: issuer, JwksUri: jwksURI, Audiences: audiences}
}

var ledgerSelector = map[string]string{"app": "ledger"}

// teamA is what team-a's APIRule writes for the ledger: /health open,
// /admin for tokens of its issuer.
func teamA() Policies {
	return Policies{
		AuthorizationPolicies: []*securityv1.AuthorizationPolicy{allow("team-a", "ledger", ledgerSelector,
			rule(to(&securityv1beta1.Operation{Paths: []string{"/health"}, Methods: []string{"GET"}})),
			jwtProtected("/admin", issuerA),
		)},
		RequestAuthentications: []*securityv1.RequestAuthentication{requestAuthentication("team-a", "ledger", ledgerSelector, jwtRule(issuerA, keysA))},
	}
}

// with adds objects to a copy of the policies.
func (p Policies) with(aps []*securityv1.AuthorizationPolicy, ras ...*securityv1.RequestAuthentication) Policies {
	p.AuthorizationPolicies = append(append([]*securityv1.AuthorizationPolicy{}, p.AuthorizationPolicies...), aps...)
	p.RequestAuthentications = append(append([]*securityv1.RequestAuthentication{}, p.RequestAuthentications...), ras...)
	return p
}

func aps(a ...*securityv1.AuthorizationPolicy) []*securityv1.AuthorizationPolicy { return a }

func get(path string, token *Token) Request {
	return Request{Workload: ledger, Host: "ledger.a.example", Path: path, Method: "GET", Port: 8080, Token: token}
}
