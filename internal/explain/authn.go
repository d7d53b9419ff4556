package explain

import (
	"fmt"
	"slices"

	securityv1beta1 "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
)

// identity is what request authentication established: nothing (no token,
// or no RequestAuthentication applies, so the token is not looked at), or
// a valid token's claims.
type identity struct {
	token *Token
}

func (id identity) principal() string {
	if id.token == nil {
		return ""
	}
	return id.token.Issuer + "/" + id.token.Subject
}

func (id identity) claim(name string) []string {
	if id.token == nil {
		return nil
	}
	return id.token.claims()[name]
}

// keySet identifies the keys a JWT rule verifies with: its jwksUri, else
// its inline key set, else the issuer's discovered one.
func keySet(issuer, jwksURI, jwks string) string {
	switch {
	case jwksURI != "":
		return jwksURI
	case jwks != "":
		return jwks
	}
	return "discovery:" + issuer
}

// places are the places a JWT rule reads tokens from: the ones it names,
// else Istio's defaults.
func places(rule *securityv1beta1.JWTRule) []Place {
	var out []Place
	for _, h := range rule.FromHeaders {
		out = append(out, InHeader(h.Name, h.Prefix))
	}
	for _, p := range rule.FromParams {
		out = append(out, InParam(p))
	}
	if len(out) == 0 {
		return defaultPlaces
	}
	return out
}

// authenticate validates the request's token against the
// RequestAuthentications that apply to the workload, as Istio merges their
// JWT rules: a token is valid if some rule reads it where the request
// carries it, names its issuer, trusts the key set it is signed with, and
// (when the rule lists audiences) one of its audiences. A token that no
// rule reads where it is carried is not looked at (the request has no
// principal); one that a rule reads but no rule validates is rejected
// (401). With no RequestAuthentication applying, the token is ignored.
func authenticate(applying []*securityv1.RequestAuthentication, r Request) (identity, *Verdict) {
	if r.Token == nil || len(applying) == 0 {
		return identity{}, nil
	}
	read := false
	for _, ra := range applying {
		for _, rule := range ra.Spec.JwtRules {
			if !slices.ContainsFunc(places(rule), func(p Place) bool { return p.reads(r.Token.place()) }) {
				continue
			}
			read = true
			if rule.Issuer != r.Token.Issuer || keySet(rule.Issuer, rule.JwksUri, rule.Jwks) != r.Token.KeySet {
				continue
			}
			if len(rule.Audiences) > 0 && !slices.ContainsFunc(r.Token.Audiences, func(a string) bool { return slices.Contains(rule.Audiences, a) }) {
				continue
			}
			return identity{token: r.Token}, nil
		}
	}
	if !read {
		return identity{}, nil
	}
	return identity{}, &Verdict{Decision: Unauthenticated, Reason: fmt.Sprintf(
		"no RequestAuthentication applying to the workload (%s) trusts issuer %s with key set %s in the %s",
		names(applying), r.Token.Issuer, r.Token.KeySet, r.Token.place())}
}
