package explain

import (
	"fmt"
	"net/netip"
	"strings"
)

// Workload is the pod a request is meant for.
type Workload struct {
	Namespace string
	Labels    map[string]string
}

// Token is a JSON Web Token presented with a request.
type Token struct {
	Issuer string
	// KeySet identifies the keys the token is signed with by their jwksUri:
	// a RequestAuthentication rule verifies it only if its jwksUri is this.
	KeySet    string
	Subject   string
	Audiences []string
	Scopes    []string
	// Claims holds further claims, each with its values.
	Claims map[string][]string
	// In is where the request carries the token; the zero value is
	// Istio's default, the Authorization header after "Bearer ".
	In Place
}

// Place is where a request carries a token: a header, after a prefix, or
// a query parameter.
type Place struct {
	Header, Prefix string
	Param          string
}

// InHeader is a header carrying a token after a prefix.
func InHeader(name, prefix string) Place { return Place{Header: name, Prefix: prefix} }

// InParam is a query parameter carrying a token.
func InParam(name string) Place { return Place{Param: name} }

// Istio's default places, read when a JWT rule names none.
var defaultPlaces = []Place{InHeader("authorization", "Bearer "), InParam("access_token")}

func (t *Token) place() Place {
	if t.In == (Place{}) {
		return defaultPlaces[0]
	}
	return t.In
}

func (p Place) String() string {
	if p.Param != "" {
		return "query parameter " + p.Param
	}
	return fmt.Sprintf("header %s after %q", p.Header, p.Prefix)
}

// reads reports whether a place of a JWT rule is where the token is:
// header names compare regardless of case.
func (p Place) reads(token Place) bool {
	if p.Param != "" || token.Param != "" {
		return p.Param == token.Param
	}
	return strings.EqualFold(p.Header, token.Header) && p.Prefix == token.Prefix
}

// claims returns every claim of the token with its values.
func (t *Token) claims() map[string][]string {
	out := map[string][]string{"iss": {t.Issuer}, "sub": {t.Subject}}
	if len(t.Audiences) > 0 {
		out["aud"] = t.Audiences
	}
	if len(t.Scopes) > 0 {
		out["scope"] = t.Scopes
	}
	for k, v := range t.Claims {
		out[k] = v
	}
	return out
}

// Peer is the mTLS identity and address the request comes from: by default
// the ingress gateway of Istio's root namespace.
type Peer struct {
	// Principal is the SPIFFE identity without scheme:
	// <trust domain>/ns/<namespace>/sa/<service account>.
	Principal string
	IP        netip.Addr
	// RemoteIP is the original client address (X-Forwarded-For).
	RemoteIP netip.Addr
}

// IngressGateway is the peer of requests that come through Istio's default
// ingress gateway.
var IngressGateway = Peer{
	Principal: "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account",
	IP:        netip.MustParseAddr("10.0.0.2"),
	RemoteIP:  netip.MustParseAddr("203.0.113.7"),
}

// parts splits the principal into trust domain, namespace and service account.
func (p Peer) parts() (trustDomain, namespace, serviceAccount string) {
	fields := strings.Split(p.Principal, "/")
	if len(fields) == 5 && fields[1] == "ns" && fields[3] == "sa" {
		return fields[0], fields[2], fields[4]
	}
	return "", "", ""
}

// Request is an HTTP request arriving at a workload's sidecar.
type Request struct {
	Workload Workload
	Host     string
	// Path is normalized and without query string, as Istio matches it.
	Path    string
	Method  string
	Port    int
	Headers map[string]string
	// Token is the JWT presented, or nil.
	Token *Token
	// From is the peer; the zero value means IngressGateway.
	From Peer
}

func (r Request) String() string {
	s := fmt.Sprintf("%s %s%s to %s/%v", r.Method, r.Host, r.Path, r.Workload.Namespace, r.Workload.Labels)
	if r.Token != nil {
		s += fmt.Sprintf(" with a token of %s signed by %s", r.Token.Issuer, r.Token.KeySet)
	}
	return s
}

// Decision is what the sidecar does with a request.
type Decision int

// The decisions, as HTTP status codes.
const (
	// Allowed: the request reaches the pod.
	Allowed Decision = 200
	// Unauthenticated: a presented token is not valid for the workload (401).
	Unauthenticated Decision = 401
	// Forbidden: the AuthorizationPolicies deny the request (403).
	Forbidden Decision = 403
)

func (d Decision) String() string {
	switch d {
	case Allowed:
		return "allowed"
	case Unauthenticated:
		return "rejected (401)"
	case Forbidden:
		return "denied (403)"
	}
	return fmt.Sprintf("decision %d", int(d))
}

// Verdict is a decision and why it was taken.
type Verdict struct {
	Decision Decision
	Reason   string
	// Authorizer is the provider of the CUSTOM policy behind a Forbidden
	// verdict: the judge takes an external authorizer as denying, and the
	// authorizer decides in fact.
	Authorizer string
}

// Allowed reports whether the request reaches the pod.
func (v Verdict) Allowed() bool { return v.Decision == Allowed }

func (v Verdict) String() string { return v.Decision.String() + ": " + v.Reason }
