package translate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// trustedIssuer is one issuer a rule trusts: its key set and the places its
// tokens are read from, in one canonical form whatever form of jwt named it.
type trustedIssuer struct {
	Issuer, JWKSURI string
	// Locations are the token locations (see tokenLocations), sorted.
	Locations []string
}

// claimsAlternative is one authorization entry: all of Scopes and one of
// Audiences (each sorted, without repeats; empty means no condition).
type claimsAlternative struct {
	Scopes, Audiences []string
}

// jwtAccess is what a jwt rule demands of a caller, order-insensitively:
// a token valid for any of Issuers (sorted by issuer) that satisfies any
// of Alternatives (sorted; none means any valid token).
type jwtAccess struct {
	Issuers      []trustedIssuer
	Alternatives []claimsAlternative
}

// accessOf normalizes both forms of jwt: the single-issuer form is a list
// of one issuer read from Istio's default places, with at most one
// alternative.
func accessOf(j *gatewayv1alpha1.JWTAuthentication) jwtAccess {
	var a jwtAccess
	if len(j.Authentications) == 0 {
		a.Issuers = []trustedIssuer{{Issuer: j.Issuer, JWKSURI: j.JWKSURI, Locations: defaultLocations()}}
		if alt := newAlternative(j.RequiredScopes, j.Audiences); len(alt.Scopes)+len(alt.Audiences) > 0 {
			a.Alternatives = []claimsAlternative{alt}
		}
		return a
	}
	for _, auth := range j.Authentications {
		a.Issuers = append(a.Issuers, trustedIssuer{Issuer: auth.Issuer, JWKSURI: auth.JWKSURI, Locations: tokenLocations(auth.FromHeaders, auth.FromParams)})
	}
	slices.SortFunc(a.Issuers, func(x, y trustedIssuer) int { return strings.Compare(x.Issuer, y.Issuer) })
	a.Issuers = slices.CompactFunc(a.Issuers, func(x, y trustedIssuer) bool { return x.Issuer == y.Issuer })
	for _, authz := range j.Authorizations {
		a.Alternatives = append(a.Alternatives, newAlternative(authz.RequiredScopes, authz.Audiences))
	}
	slices.SortFunc(a.Alternatives, func(x, y claimsAlternative) int { return strings.Compare(x.key(), y.key()) })
	a.Alternatives = slices.CompactFunc(a.Alternatives, func(x, y claimsAlternative) bool { return x.key() == y.key() })
	return a
}

func newAlternative(scopes, audiences []string) claimsAlternative {
	return claimsAlternative{Scopes: sortedSet(scopes), Audiences: sortedSet(audiences)}
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(s)))
}

func (c claimsAlternative) key() string {
	return fmt.Sprintf("%q %q", c.Scopes, c.Audiences)
}

func (c claimsAlternative) String() string {
	var parts []string
	if len(c.Audiences) > 0 {
		parts = append(parts, "audiences "+strings.Join(c.Audiences, ","))
	}
	if len(c.Scopes) > 0 {
		parts = append(parts, "scopes "+strings.Join(c.Scopes, ","))
	}
	return strings.Join(parts, ", ")
}

// issuerNames lists the issuers, sorted.
func (a jwtAccess) issuerNames() []string {
	names := make([]string, len(a.Issuers))
	for i, iss := range a.Issuers {
		names[i] = iss.Issuer
	}
	return names
}

// equal reports whether two jwt rules demand the same of a caller: the
// same issuers with the same key sets and token locations, and the same
// alternatives.
func (a jwtAccess) equal(b jwtAccess) bool {
	return slices.EqualFunc(a.Issuers, b.Issuers, func(x, y trustedIssuer) bool {
		return x.Issuer == y.Issuer && x.JWKSURI == y.JWKSURI && slices.Equal(x.Locations, y.Locations)
	}) && slices.EqualFunc(a.Alternatives, b.Alternatives, func(x, y claimsAlternative) bool { return x.key() == y.key() })
}

func (a jwtAccess) String() string {
	desc := "jwt issuer"
	if len(a.Issuers) > 1 {
		desc += "s"
	}
	desc += " " + strings.Join(a.issuerNames(), ",")
	alts := make([]string, len(a.Alternatives))
	for i, alt := range a.Alternatives {
		alts[i] = alt.String()
	}
	if len(alts) > 0 {
		desc += ", " + strings.Join(alts, " or ")
	}
	return desc
}

// Istio reads a token from the Authorization header after "Bearer ", or
// from the access_token query parameter, when a JWT rule names no place.
const (
	defaultTokenHeader = "authorization"
	defaultTokenPrefix = "Bearer "
	defaultTokenParam  = "access_token"
)

// tokenLocations describes where tokens are read from, one string per
// place: "header <name> <prefix>" (header names are case-insensitive) or
// "param <name>", sorted. No place at all means Istio's default places.
func tokenLocations(headers []gatewayv1alpha1.JWTHeader, params []string) []string {
	if len(headers) == 0 && len(params) == 0 {
		return defaultLocations()
	}
	var out []string
	for _, h := range headers {
		out = append(out, fmt.Sprintf("header %s %q", strings.ToLower(h.Name), h.Prefix))
	}
	for _, p := range params {
		out = append(out, "param "+p)
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

func defaultLocations() []string {
	return []string{fmt.Sprintf("header %s %q", defaultTokenHeader, defaultTokenPrefix), "param " + defaultTokenParam}
}

// jwtRuleLocations are a JWT rule's token locations in the form of
// tokenLocations, so that rules written by anyone compare with the
// APIRule's.
func jwtRuleLocations(j *securityv1beta1.JWTRule) []string {
	headers := make([]gatewayv1alpha1.JWTHeader, 0, len(j.FromHeaders))
	for _, h := range j.FromHeaders {
		headers = append(headers, gatewayv1alpha1.JWTHeader{Name: h.Name, Prefix: h.Prefix})
	}
	return tokenLocations(headers, j.FromParams)
}

// jwtRuleOf is the RequestAuthentication JWT rule of a trusted issuer. The
// default places are left implicit, as Istio reads them.
func jwtRuleOf(iss gatewayv1alpha1.JWTIssuer) *securityv1beta1.JWTRule {
	rule := &securityv1beta1.JWTRule{Issuer: iss.Issuer, JwksUri: iss.JWKSURI, ForwardOriginalToken: true}
	for _, h := range iss.FromHeaders {
		rule.FromHeaders = append(rule.FromHeaders, &securityv1beta1.JWTHeader{Name: h.Name, Prefix: h.Prefix})
	}
	slices.SortFunc(rule.FromHeaders, func(x, y *securityv1beta1.JWTHeader) int { return strings.Compare(x.Name, y.Name) })
	rule.FromParams = sortedSet(iss.FromParams)
	return rule
}

// issuersOf lists the issuers a jwt rule names, in either form.
func issuersOf(j *gatewayv1alpha1.JWTAuthentication) []gatewayv1alpha1.JWTIssuer {
	if len(j.Authentications) == 0 {
		return []gatewayv1alpha1.JWTIssuer{{Issuer: j.Issuer, JWKSURI: j.JWKSURI}}
	}
	return j.Authentications
}

// checkIssuers rejects an issuer named twice in the APIRule with another
// key set or other token locations: Istio merges the JWT rules of a
// workload, so tokens signed with either key set, or found in either place,
// would pass both rules.
func checkIssuers(r *gatewayv1alpha1.APIRule) error {
	type seen struct {
		path      string
		jwks      string
		locations []string
	}
	byIssuer := map[string]seen{}
	for _, rule := range r.Spec.Rules {
		token := rule.TokenRequirement()
		if token == nil {
			continue
		}
		for _, iss := range issuersOf(token) {
			locations := tokenLocations(iss.FromHeaders, iss.FromParams)
			existing, ok := byIssuer[iss.Issuer]
			if !ok {
				byIssuer[iss.Issuer] = seen{path: rule.Path, jwks: iss.JWKSURI, locations: locations}
				continue
			}
			if existing.jwks != iss.JWKSURI {
				return fmt.Errorf("rules for path %s use issuer %s with jwksUri %s, but the rule for path %s uses %s: one issuer needs one key set",
					rule.Path, iss.Issuer, iss.JWKSURI, existing.path, existing.jwks)
			}
			if !slices.Equal(existing.locations, locations) {
				return fmt.Errorf("rules for path %s read tokens of issuer %s from %s, but the rule for path %s reads them from %s: "+
					"Istio merges the places of an issuer, so both rules would accept tokens from all of them; give the issuer the same fromHeaders and fromParams everywhere",
					rule.Path, iss.Issuer, strings.Join(locations, ", "), existing.path, strings.Join(existing.locations, ", "))
			}
		}
	}
	return nil
}

// jwtRules collects one JWT rule per issuer of the rules routed to backend
// (checkIssuers made an issuer's key set and places the same everywhere).
func jwtRules(r *gatewayv1alpha1.APIRule, backend types.NamespacedName) []*securityv1beta1.JWTRule {
	byIssuer := map[string]*securityv1beta1.JWTRule{}
	for _, rule := range r.Spec.Rules {
		token := rule.TokenRequirement()
		if token == nil || !servesBackend(r, rule, backend) {
			continue
		}
		for _, iss := range issuersOf(token) {
			if _, ok := byIssuer[iss.Issuer]; !ok {
				byIssuer[iss.Issuer] = jwtRuleOf(iss)
			}
		}
	}
	var out []*securityv1beta1.JWTRule
	for _, issuer := range slices.Sorted(maps.Keys(byIssuer)) {
		out = append(out, byIssuer[issuer])
	}
	return out
}

// callerRules are the AuthorizationPolicy rules that let a jwt rule's
// callers do op: one per alternative (Istio ORs the rules of a policy), each
// requiring a request principal of a listed issuer, the issuer pinned
// exactly by its claim (the principal is <iss>/<sub>: "iss/*" alone would
// also admit an issuer named iss/<anything> that another
// RequestAuthentication on the workload trusts), one of the alternative's
// audiences and every one of its scopes.
func callerRules(access jwtAccess, op *securityv1beta1.Operation) []*securityv1beta1.Rule {
	issuers := access.issuerNames()
	principals := make([]string, len(issuers))
	for i, iss := range issuers {
		principals[i] = iss + "/*"
	}
	alternatives := access.Alternatives
	if len(alternatives) == 0 {
		alternatives = []claimsAlternative{{}}
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
