package judge

import (
	"fmt"
	"slices"

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

// authenticate validates the request's token against the
// RequestAuthentications that apply to the workload. A token is valid if
// some rule names its issuer, trusts the key set it is signed with, and
// (when the rule lists audiences) one of its audiences. A presented token
// no rule validates is rejected (401) if any RequestAuthentication applies;
// with none applying, the token is ignored and the request has no principal.
func authenticate(applying []*securityv1.RequestAuthentication, r Request) (identity, *Verdict) {
	if r.Token == nil || len(applying) == 0 {
		return identity{}, nil
	}
	for _, ra := range applying {
		for _, rule := range ra.Spec.JwtRules {
			if rule.Issuer != r.Token.Issuer || keySet(rule.Issuer, rule.JwksUri, rule.Jwks) != r.Token.KeySet {
				continue
			}
			if len(rule.Audiences) > 0 && !slices.ContainsFunc(r.Token.Audiences, func(a string) bool { return slices.Contains(rule.Audiences, a) }) {
				continue
			}
			return identity{token: r.Token}, nil
		}
	}
	return identity{}, &Verdict{Decision: Unauthenticated, Reason: fmt.Sprintf(
		"no RequestAuthentication applying to the workload (%s) trusts issuer %s with key set %s",
		names(applying), r.Token.Issuer, r.Token.KeySet)}
}
