package access

import (
	"fmt"
	"slices"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/tokencheck"
)

// Issuer is one issuer a rule trusts: its key set and the places its
// tokens are read from, in one canonical form whatever form of jwt named it.
type Issuer struct {
	Issuer, JWKSURI string
	// Locations are the token locations (see TokenLocations), sorted.
	Locations []string
}

// Alternative is one authorization entry: all of Scopes and one of
// Audiences (each sorted, without repeats; empty means no condition).
type Alternative struct {
	Scopes, Audiences []string
}

// JWT is what a jwt rule demands of a caller, order-insensitively:
// a token valid for any of Issuers (sorted by issuer) that satisfies any
// of Alternatives (sorted; none means any valid token).
type JWT struct {
	Issuers      []Issuer
	Alternatives []Alternative
}

// OfJWT normalizes both forms of jwt: the single-issuer form is a list
// of one issuer read from Istio's default places, with at most one
// alternative.
func OfJWT(j *porticov1alpha1.JWTAuthentication) JWT {
	var a JWT
	if len(j.Authentications) == 0 {
		a.Issuers = []Issuer{{Issuer: j.Issuer, JWKSURI: j.JWKSURI, Locations: defaultLocations()}}
		if alt := NewAlternative(j.RequiredScopes, j.Audiences); len(alt.Scopes)+len(alt.Audiences) > 0 {
			a.Alternatives = []Alternative{alt}
		}
		return a
	}
	for _, auth := range j.Authentications {
		a.Issuers = append(a.Issuers, Issuer{Issuer: auth.Issuer, JWKSURI: auth.JWKSURI, Locations: TokenLocations(auth.FromHeaders, auth.FromParams)})
	}
	slices.SortFunc(a.Issuers, func(x, y Issuer) int { return strings.Compare(x.Issuer, y.Issuer) })
	a.Issuers = slices.CompactFunc(a.Issuers, func(x, y Issuer) bool { return x.Issuer == y.Issuer })
	for _, authz := range j.Authorizations {
		a.Alternatives = append(a.Alternatives, NewAlternative(authz.RequiredScopes, authz.Audiences))
	}
	slices.SortFunc(a.Alternatives, func(x, y Alternative) int { return strings.Compare(x.key(), y.key()) })
	a.Alternatives = slices.CompactFunc(a.Alternatives, func(x, y Alternative) bool { return x.key() == y.key() })
	return a
}

// NewAlternative is one way to satisfy a rule's JWT access: the scopes and
// audiences a token must carry, as sorted sets.
func NewAlternative(scopes, audiences []string) Alternative {
	return Alternative{Scopes: sortedSet(scopes), Audiences: sortedSet(audiences)}
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(s)))
}

func (c Alternative) key() string {
	return fmt.Sprintf("%q %q", c.Scopes, c.Audiences)
}

func (c Alternative) String() string {
	var parts []string
	if len(c.Audiences) > 0 {
		parts = append(parts, "audiences "+strings.Join(c.Audiences, ","))
	}
	if len(c.Scopes) > 0 {
		parts = append(parts, "scopes "+strings.Join(c.Scopes, ","))
	}
	return strings.Join(parts, ", ")
}

// TokenRequirement is what a token must satisfy for this access, in the
// form `portico explain` checks a token's claims with (tokencheck.Check).
func (a JWT) TokenRequirement() tokencheck.Requirement {
	req := tokencheck.Requirement{Issuers: a.IssuerNames()}
	for _, alt := range a.Alternatives {
		req.Alternatives = append(req.Alternatives, tokencheck.Alternative{
			Scopes: slices.Clone(alt.Scopes), Audiences: slices.Clone(alt.Audiences),
		})
	}
	return req
}

// IssuerNames lists the issuers, sorted.
func (a JWT) IssuerNames() []string {
	names := make([]string, len(a.Issuers))
	for i, iss := range a.Issuers {
		names[i] = iss.Issuer
	}
	return names
}

// Equal reports whether two jwt rules demand the same of a caller: the
// same issuers with the same key sets and token locations, and the same
// alternatives.
func (a JWT) Equal(b JWT) bool {
	return slices.EqualFunc(a.Issuers, b.Issuers, func(x, y Issuer) bool {
		return x.Issuer == y.Issuer && x.JWKSURI == y.JWKSURI && slices.Equal(x.Locations, y.Locations)
	}) && slices.EqualFunc(a.Alternatives, b.Alternatives, func(x, y Alternative) bool { return x.key() == y.key() })
}

func (a JWT) String() string {
	desc := "jwt issuer"
	if len(a.Issuers) > 1 {
		desc += "s"
	}
	desc += " " + strings.Join(a.IssuerNames(), ",")
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

// TokenLocations describes where tokens are read from, one string per
// place: "header <name> <prefix>" (header names are case-insensitive) or
// "param <name>", sorted. No place at all means Istio's default places.
func TokenLocations(headers []porticov1alpha1.JWTHeader, params []string) []string {
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
// TokenLocations, so that rules written by anyone compare with the
// APIRule's.
func jwtRuleLocations(j *securityv1beta1.JWTRule) []string {
	headers := make([]porticov1alpha1.JWTHeader, 0, len(j.FromHeaders))
	for _, h := range j.FromHeaders {
		headers = append(headers, porticov1alpha1.JWTHeader{Name: h.Name, Prefix: h.Prefix})
	}
	return TokenLocations(headers, j.FromParams)
}

// IssuersOf lists the issuers a jwt rule names, in either form.
func IssuersOf(j *porticov1alpha1.JWTAuthentication) []porticov1alpha1.JWTIssuer {
	if len(j.Authentications) == 0 {
		return []porticov1alpha1.JWTIssuer{{Issuer: j.Issuer, JWKSURI: j.JWKSURI}}
	}
	return j.Authentications
}
