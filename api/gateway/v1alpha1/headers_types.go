package v1alpha1

import (
	"slices"
	"strings"
)

// Response headers, request header removal and client addresses (issue 43,
// parts 3 and 4). The request side's model is in rulemods_types.go:
// names are compared as backends read them (NormalizeHeaderName), and the
// CRD's CEL rules spell the same lists as the Go ones the controller
// checks with.

// Totals over an APIRule's rules, so that an APIRule at every bound still
// fits in one stored object (TestWorstCaseAPIRuleIsStored): the response
// headers its rules set, add and remove, the request headers they remove,
// and the client address blocks they list. The CRD's CEL rules on
// spec spell the same numbers.
const (
	MaxResponseHeadersPerAPIRule = 64
	MaxRemovedHeadersPerAPIRule  = 32
	MaxAddressBlocksPerAPIRule   = 64
)

// Names of response headers a rule may not set, add or remove, compared as
// NormalizeHeaderName reads them: the response's framing and connection
// (content-length, transfer-encoding, connection, keep-alive,
// proxy-connection, upgrade, trailer, te), which Envoy owns; the session
// cookies that backends and external authorizers issue (set-cookie: one
// fixed cookie for every caller would be a fixed session, and removing it
// would break an authorizer's login); the APIRule's CORS policy
// (access-control-*), which spec.cors owns; Envoy's x-envoy-* and
// x-portico-*, kept for Portico.
var (
	ReservedResponseHeaders = []string{
		"content-length",
		"transfer-encoding",
		"connection",
		"keep-alive",
		"proxy-connection",
		"upgrade",
		"trailer",
		"te",
		"set-cookie",
	}
	ReservedResponseHeaderPrefixes = []string{
		"access-control",
		"x-envoy",
		"x-portico",
	}
)

// IsReservedResponseHeader reports whether a rule may not set, add or
// remove the response header: one of ReservedResponseHeaders or with a
// ReservedResponseHeaderPrefixes prefix, in any spelling read as one of
// them (NormalizeHeaderName).
func IsReservedResponseHeader(name string) bool {
	name = NormalizeHeaderName(name)
	if slices.Contains(ReservedResponseHeaders, name) {
		return true
	}
	return slices.ContainsFunc(ReservedResponseHeaderPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// RemovedRequestHeader is the name of a request header the gateway
// removes: a lower-case HTTP token of at most 64 characters, not one that
// carries the caller's identity, the request's routing or framing, or its
// trace (the list of request.headers, compared the same way): the mesh
// reads those after the gateway (the backend's sidecar reads the token in
// authorization and the client address in x-forwarded-for), so removing
// one would change who the backend's access policy sees.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^[-a-z0-9!#$&\\\\x27*+.^_`|~]+$')",message="request.removeHeaders names must be lower-case HTTP header names (letters, digits and !#$&'*+-.^_`|~) of at most 64 characters"
// +kubebuilder:validation:XValidation:rule="[self.lowerAscii().replace('_', '-').replace('.', '-')].all(n, !(n in ['authorization','proxy-authorization','cookie','host','forwarded','via','x-request-id','x-real-ip','x-client-trace-id','traceparent','tracestate','b3','x-ot-span-context','content-length','transfer-encoding','te','connection','upgrade','keep-alive','proxy-connection','trailer','expect']) && !n.startsWith('x-forwarded') && !n.startsWith('x-envoy') && !n.startsWith('x-b3') && !n.startsWith('x-istio') && !n.startsWith('x-jwt') && !n.startsWith('x-auth-request') && !n.startsWith('x-ext-authz') && !n.startsWith('x-portico'))",message="request.removeHeaders may not remove a header that carries the caller's identity, the request's routing or framing, or its trace, in any spelling a backend reads as one of them ('_' or '.' for '-'): the mesh reads them after the gateway (the same list as request.headers)"
type RemovedRequestHeader string

// ResponseHeaderName is the name of a response header a rule sets, adds
// or removes: a lower-case HTTP token of at most 64 characters, not one of
// ReservedResponseHeaders or their prefixes.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^[-a-z0-9!#$&\\\\x27*+.^_`|~]+$')",message="response header names must be lower-case HTTP header names (letters, digits and !#$&'*+-.^_`|~) of at most 64 characters"
// +kubebuilder:validation:XValidation:rule="[self.lowerAscii().replace('_', '-').replace('.', '-')].all(n, !(n in ['content-length','transfer-encoding','connection','keep-alive','proxy-connection','upgrade','trailer','te','set-cookie']) && !n.startsWith('access-control') && !n.startsWith('x-envoy') && !n.startsWith('x-portico'))",message="response headers may not name the response's framing or connection (content-length, transfer-encoding, connection, keep-alive, proxy-connection, upgrade, trailer, te), set-cookie (sessions are the backend's and its authorizer's), access-control-* (spec.cors owns them), x-envoy-* or x-portico-*, in any spelling read as one of them ('_' or '.' for '-')"
type ResponseHeaderName string

// ResponseHeaderValue is the value of a response header a rule sets or
// adds: 1 to 512 printable ASCII characters without '%' (Envoy reads
// %...% as a command operator) and without spaces at either end.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule="self.matches('^[\\\\x21-\\\\x24\\\\x26-\\\\x7e]([\\\\x20-\\\\x24\\\\x26-\\\\x7e]*[\\\\x21-\\\\x24\\\\x26-\\\\x7e])?$')",message="a response header value must be printable ASCII without '%' and without spaces at either end"
type ResponseHeaderValue string

// ResponseHeader is one response header a rule adds.
type ResponseHeader struct {
	// name of the header.
	// +required
	Name ResponseHeaderName `json:"name"`

	// value the gateway appends, after the backend's values of the header.
	// +required
	Value ResponseHeaderValue `json:"value"`
}

// ResponseModifier changes the response before the gateway returns it to
// the client. One name appears at most once in set, add and remove
// together, as backends read names ('_' and '.' as '-').
// +kubebuilder:validation:XValidation:rule="!has(self.set) || !has(self.remove) || self.remove.all(r, self.set.all(k, k.lowerAscii().replace('_', '-').replace('.', '-') != r.lowerAscii().replace('_', '-').replace('.', '-')))",message="response names one header in set and remove: which one applies would be undefined"
// +kubebuilder:validation:XValidation:rule="!has(self.add) || !has(self.remove) || self.remove.all(r, self.add.all(a, a.name.lowerAscii().replace('_', '-').replace('.', '-') != r.lowerAscii().replace('_', '-').replace('.', '-')))",message="response names one header in add and remove: which one applies would be undefined"
// +kubebuilder:validation:XValidation:rule="!has(self.add) || !has(self.set) || self.add.all(a, self.set.all(k, k.lowerAscii().replace('_', '-').replace('.', '-') != a.name.lowerAscii().replace('_', '-').replace('.', '-')))",message="response names one header in set and add: set replaces the backend's values, add appends to them; name it once"
type ResponseModifier struct {
	// set are response headers the gateway sets, replacing the backend's
	// values: at most 8, such as security headers
	// (strict-transport-security, x-content-type-options,
	// content-security-policy). Names are lower-case HTTP tokens of at most
	// 64 characters, values 1 to 512 printable ASCII characters without
	// '%'. Refused: the response's framing and connection (content-length,
	// transfer-encoding, connection, upgrade and the like), set-cookie,
	// access-control-* (spec.cors owns them), x-envoy-* and x-portico-*,
	// with names compared with '_' and '.' as '-'.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 64 && k.matches('^[-a-z0-9!#$&\\\\x27*+.^_`|~]+$'))",message="response.set names must be lower-case HTTP header names (letters, digits and !#$&'*+-.^_`|~) of at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, [k.lowerAscii().replace('_', '-').replace('.', '-')].all(n, !(n in ['content-length','transfer-encoding','connection','keep-alive','proxy-connection','upgrade','trailer','te','set-cookie']) && !n.startsWith('access-control') && !n.startsWith('x-envoy') && !n.startsWith('x-portico')))",message="response.set may not name the response's framing or connection, set-cookie, access-control-* (spec.cors owns them), x-envoy-* or x-portico-*, in any spelling read as one of them ('_' or '.' for '-')"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.exists_one(j, j.lowerAscii().replace('_', '-').replace('.', '-') == k.lowerAscii().replace('_', '-').replace('.', '-')))",message="response.set names one header twice ('_' and '.' read as '-')"
	Set map[string]ResponseHeaderValue `json:"set,omitempty"`

	// add are response headers the gateway appends to the backend's values
	// of the same name: at most 8, each name once, with the names and
	// values of set.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name.lowerAscii().replace('_', '-').replace('.', '-') == a.name.lowerAscii().replace('_', '-').replace('.', '-')))",message="response.add names one header twice ('_' and '.' read as '-')"
	Add []ResponseHeader `json:"add,omitempty"`

	// remove are response headers the gateway removes, such as server or
	// x-powered-by, which tell an attacker what runs behind it: at most 8,
	// with the names of set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.lowerAscii().replace('_', '-').replace('.', '-') == a.lowerAscii().replace('_', '-').replace('.', '-')))",message="response.remove names one header twice ('_' and '.' read as '-')"
	Remove []ResponseHeaderName `json:"remove,omitempty"`
}

// AddressBlock is a client address: an IP address ("203.0.113.7") or a
// CIDR block written in its canonical form ("203.0.113.0/24", not
// "203.0.113.7/24"), IPv4 or IPv6.
// +kubebuilder:validation:MinLength=2
// +kubebuilder:validation:MaxLength=43
// +kubebuilder:validation:XValidation:rule="isIP(self) || (isCIDR(self) && string(cidr(self).masked()) == self)",message="a client address must be an IP address or a CIDR block in canonical form (no bits set after the prefix: 10.0.0.0/8, not 10.1.2.3/8)"
type AddressBlock string

// ClientAddresses allows a rule's requests by the client's address, as the
// gateway determined it from X-Forwarded-For with the trusted-proxy count
// the cluster administrator set (APIGateway spec.apiRules.trustedProxies).
// +kubebuilder:validation:XValidation:rule="has(self.allow) || has(self.deny)",message="clientAddresses needs allow, deny or both"
type ClientAddresses struct {
	// allow lets through only requests whose client address is in one of
	// these blocks: at most 16 IP addresses or CIDR blocks.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Allow []AddressBlock `json:"allow,omitempty"`

	// deny refuses requests whose client address is in one of these
	// blocks, even one that allow lets through: at most 16 IP addresses or
	// CIDR blocks.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Deny []AddressBlock `json:"deny,omitempty"`
}
