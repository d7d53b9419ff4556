package istio

import (
	"maps"
	"slices"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// AuthorizationPolicy allows, on one workload's pods, the requests of the
// rules routed to it. Istio allows a request that any ALLOW rule of any
// policy on the workload matches, so the plan's checks must have made sure
// that no rule matches a request another rule guards with other
// authentication. A rule's header and query-parameter matches add no
// condition here: the client chooses them, so requiring them would guard
// nothing (the checks make such rules agree instead).
func AuthorizationPolicy(p *plan.Plan, w plan.Workload) *securityv1.AuthorizationPolicy {
	ap := policy(p, w, w.PolicyName, securityv1beta1.AuthorizationPolicy_ALLOW)
	spec := &ap.Spec
	for _, exposed := range p.Routes {
		if !exposed.Serves(w.Service) {
			continue
		}
		op := &securityv1beta1.Operation{Paths: []string{exposed.BackendPath}, Methods: slices.Clone(exposed.Methods)}
		if exposed.Access == nil {
			// noAuth, or extAuth without restrictions: the CUSTOM policy
			// has the authorizer decide first.
			rule := &securityv1beta1.Rule{To: []*securityv1beta1.Rule_To{{Operation: op}}}
			if source := clientSource(p, exposed.Clients); source != nil {
				rule.From = []*securityv1beta1.Rule_From{{Source: source}}
			}
			spec.Rules = append(spec.Rules, rule)
			continue
		}
		rules := callerRules(*exposed.Access, op)
		for _, rule := range rules {
			addClients(rule.From[0].Source, clientSource(p, exposed.Clients))
		}
		spec.Rules = append(spec.Rules, rules...)
	}
	return ap
}

// CustomPolicy hands the requests of the extAuth rules routed to one
// workload to their authorizer: an AuthorizationPolicy with action CUSTOM,
// on the paths the backend sees (BackendPath) and the rules' methods only.
// Istio evaluates CUSTOM policies before ALLOW ones, so the authorizer
// decides first, then the ALLOW policy must still admit the request. It
// returns nil without extAuth rules on the workload.
func CustomPolicy(p *plan.Plan, w plan.Workload) *securityv1.AuthorizationPolicy {
	var provider string
	var rules []*securityv1beta1.Rule
	for _, exposed := range p.Routes {
		if exposed.Authorizer == "" || !exposed.Serves(w.Service) {
			continue
		}
		// The checks made it one authorizer per workload.
		provider = exposed.Authorizer
		op := &securityv1beta1.Operation{Paths: []string{exposed.BackendPath}, Methods: slices.Clone(exposed.Methods)}
		rules = append(rules, &securityv1beta1.Rule{To: []*securityv1beta1.Rule_To{{Operation: op}}})
	}
	if len(rules) == 0 {
		return nil
	}
	ap := policy(p, w, w.CustomPolicyName, securityv1beta1.AuthorizationPolicy_CUSTOM)
	spec := &ap.Spec
	spec.ActionDetail = &securityv1beta1.AuthorizationPolicy_Provider{Provider: &securityv1beta1.AuthorizationPolicy_ExtensionProvider{Name: provider}}
	spec.Rules = rules
	return ap
}

// policy is an AuthorizationPolicy on a workload's pods, without rules.
func policy(p *plan.Plan, w plan.Workload, name string, action securityv1beta1.AuthorizationPolicy_Action) *securityv1.AuthorizationPolicy {
	ap := &securityv1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy"},
		ObjectMeta: p.ObjectMeta(w.Service.Namespace, name),
	}
	ap.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(w.Selector)}
	ap.Spec.Action = action
	return ap
}

// RequestAuthentication has one JWT rule per issuer of the jwt rules
// routed to one workload (the checks made an issuer's key set and places
// the same everywhere), or is nil without them.
func RequestAuthentication(p *plan.Plan, w plan.Workload) *securityv1.RequestAuthentication {
	byIssuer := map[string]*securityv1beta1.JWTRule{}
	for _, rule := range p.Rules {
		if rule.Token == nil || !rule.Serves(w.Service) {
			continue
		}
		for _, iss := range access.IssuersOf(rule.Token) {
			if _, ok := byIssuer[iss.Issuer]; !ok {
				byIssuer[iss.Issuer] = jwtRuleOf(iss)
			}
		}
	}
	if len(byIssuer) == 0 {
		return nil
	}
	ra := &securityv1.RequestAuthentication{
		TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "RequestAuthentication"},
		ObjectMeta: p.ObjectMeta(w.Service.Namespace, w.PolicyName),
	}
	ra.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(w.Selector)}
	for _, issuer := range slices.Sorted(maps.Keys(byIssuer)) {
		ra.Spec.JwtRules = append(ra.Spec.JwtRules, byIssuer[issuer])
	}
	return ra
}

// jwtRuleOf is the RequestAuthentication JWT rule of a trusted issuer. The
// default places are left implicit, as Istio reads them.
func jwtRuleOf(iss porticov1alpha1.JWTIssuer) *securityv1beta1.JWTRule {
	rule := &securityv1beta1.JWTRule{Issuer: iss.Issuer, JwksUri: iss.JWKSURI, ForwardOriginalToken: true}
	for _, h := range iss.FromHeaders {
		rule.FromHeaders = append(rule.FromHeaders, &securityv1beta1.JWTHeader{Name: h.Name, Prefix: h.Prefix})
	}
	slices.SortFunc(rule.FromHeaders, func(x, y *securityv1beta1.JWTHeader) int { return strings.Compare(x.Name, y.Name) })
	if len(iss.FromParams) > 0 {
		rule.FromParams = slices.Compact(slices.Sorted(slices.Values(iss.FromParams)))
	}
	return rule
}

// callerRules are the AuthorizationPolicy rules that let a jwt rule's
// callers do op: one per alternative (Istio ORs the rules of a policy), each
// requiring a request principal of a listed issuer, the issuer pinned
// exactly by its claim (the principal is <iss>/<sub>: "iss/*" alone would
// also admit an issuer named iss/<anything> that another
// RequestAuthentication on the workload trusts), one of the alternative's
// audiences and every one of its scopes.
func callerRules(jwt access.JWT, op *securityv1beta1.Operation) []*securityv1beta1.Rule {
	issuers := jwt.IssuerNames()
	principals := make([]string, len(issuers))
	for i, iss := range issuers {
		principals[i] = iss + "/*"
	}
	alternatives := jwt.Alternatives
	if len(alternatives) == 0 {
		alternatives = []access.Alternative{{}}
	}
	rules := make([]*securityv1beta1.Rule, 0, len(alternatives))
	for _, alt := range alternatives {
		rule := &securityv1beta1.Rule{
			To:   []*securityv1beta1.Rule_To{{Operation: cloneOperation(op)}},
			From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{RequestPrincipals: slices.Clone(principals)}}},
			When: []*securityv1beta1.Condition{{Key: "request.auth.claims[iss]", Values: slices.Clone(issuers)}},
		}
		if len(alt.Audiences) > 0 {
			rule.When = append(rule.When, &securityv1beta1.Condition{Key: "request.auth.claims[aud]", Values: slices.Clone(alt.Audiences)})
		}
		for _, scope := range alt.Scopes {
			rule.When = append(rule.When, &securityv1beta1.Condition{Key: "request.auth.claims[scope]", Values: []string{scope}})
		}
		rules = append(rules, rule)
	}
	return rules
}

func cloneOperation(op *securityv1beta1.Operation) *securityv1beta1.Operation {
	return &securityv1beta1.Operation{Paths: slices.Clone(op.Paths), Methods: slices.Clone(op.Methods)}
}

// clientSource is the source a rule with clientAddresses requires: a
// request that came from the gateway's namespace (only the gateway vouches
// for X-Forwarded-For: a pod elsewhere in the mesh could write any), whose
// client address (remote.ip, the last X-Forwarded-For entry the gateway
// set) is in an allowed block, if any are listed, and in no denied one.
// It is nil without clientAddresses.
func clientSource(p *plan.Plan, c *plan.Clients) *securityv1beta1.Source {
	if c == nil {
		return nil
	}
	return &securityv1beta1.Source{
		Namespaces:        []string{p.GatewayNamespace()},
		RemoteIpBlocks:    slices.Clone(c.Allow),
		NotRemoteIpBlocks: slices.Clone(c.Deny),
	}
}

// addClients adds a client source's requirements to a source.
func addClients(to, clients *securityv1beta1.Source) {
	if clients == nil {
		return
	}
	to.Namespaces = clients.Namespaces
	to.RemoteIpBlocks = clients.RemoteIpBlocks
	to.NotRemoteIpBlocks = clients.NotRemoteIpBlocks
}
