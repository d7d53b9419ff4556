package v1alpha1

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RetryCondition is a connection-level condition on which Istio's Envoy
// retries a request (its retryOn policies). Status codes are listed in
// codes instead.
// +kubebuilder:validation:Enum=5xx;gateway-error;reset;connect-failure;refused-stream;retriable-4xx
type RetryCondition string

// RetryConditions are the values RetryCondition admits, for the
// controller's own check.
var RetryConditions = []RetryCondition{"5xx", "gateway-error", "reset", "connect-failure", "refused-stream", "retriable-4xx"}

// RetryPolicy retries a failed request on the same route.
// +kubebuilder:validation:XValidation:rule="has(self.codes) || has(self.retryOn)",message="retries needs codes, retryOn or both: the failures to retry on"
type RetryPolicy struct {
	// attempts is the most retries of one request, from 1 to 10. Every
	// retry is one more request to the backend.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Attempts int32 `json:"attempts"`

	// perTryTimeout bounds each try, including the first, from 1ms to 1h in
	// whole milliseconds; the rule's timeout (or spec.timeout) still bounds
	// all tries together, so it may not exceed it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self != '' && self.matches('^([0-9]+([.][0-9]{1,5})?h)?([0-9]+([.][0-9]{1,4})?m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?$') && duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="perTryTimeout must be a duration from 1ms to 1h in whole milliseconds, such as 500ms, 15s or 1m30s"
	PerTryTimeout *metav1.Duration `json:"perTryTimeout,omitempty"`

	// codes are the HTTP response status codes (400 to 599) to retry on,
	// such as 502, 503 and 504 (Envoy's retriable-status-codes).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=400
	// +kubebuilder:validation:items:Maximum=599
	Codes []int32 `json:"codes,omitempty"`

	// retryOn are Envoy's retry conditions: 5xx (any 5xx or no answer),
	// gateway-error (502, 503, 504), reset (the backend reset or did not
	// answer), connect-failure, refused-stream, retriable-4xx (409).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=6
	RetryOn []RetryCondition `json:"retryOn,omitempty"`
}

// Names of request headers a rule may not set (request.headers), compared
// as the backend will read them (NormalizeHeaderName: x_forwarded_for and
// x.forwarded.for are x-forwarded-for). They carry the caller's identity
// (authorization, cookie: request.cookies replaces it knowingly, the
// client-address and client-certificate headers of x-forwarded-*,
// forwarded, x-real-ip, and the identity headers that JWT and external
// authorization hand to a backend: x-jwt-*, x-auth-request-*, x-ext-authz*),
// the routing and framing of the request (host, content-length,
// transfer-encoding, te, connection, upgrade, keep-alive, proxy-connection,
// trailer, expect, via, Envoy's x-envoy-* and Istio's x-istio-*), or its
// trace (x-request-id, traceparent, tracestate, b3, x-b3-*,
// x-ot-span-context, x-client-trace-id); x-portico-* is kept for Portico.
// Pseudo-headers (":authority") are not HTTP tokens and fail the name
// check. The CRD's CEL rule on request.headers spells the same lists,
// normalized the same way; a test builds the rule from these lists and
// compares it with the CRD's.
var (
	ReservedRequestHeaders = []string{
		"authorization",
		"proxy-authorization",
		"cookie",
		"host",
		"forwarded",
		"via",
		"x-request-id",
		"x-real-ip",
		"x-client-trace-id",
		"traceparent",
		"tracestate",
		"b3",
		"x-ot-span-context",
		"content-length",
		"transfer-encoding",
		"te",
		"connection",
		"upgrade",
		"keep-alive",
		"proxy-connection",
		"trailer",
		"expect",
	}
	ReservedRequestHeaderPrefixes = []string{
		"x-forwarded",
		"x-envoy",
		"x-b3",
		"x-istio",
		"x-jwt",
		"x-auth-request",
		"x-ext-authz",
		"x-portico",
	}
)

// RequestHeaderValue is the value of a header a rule sets: 1 to 512
// printable ASCII characters without '%' (Envoy reads %...% as a command
// operator such as %DOWNSTREAM_REMOTE_ADDRESS%) and without spaces at
// either end.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule="self.matches('^[\\\\x21-\\\\x24\\\\x26-\\\\x7e]([\\\\x20-\\\\x24\\\\x26-\\\\x7e]*[\\\\x21-\\\\x24\\\\x26-\\\\x7e])?$')",message="a request.headers value must be printable ASCII without '%' and without spaces at either end"
type RequestHeaderValue string

// CookieValue is the value of a cookie a rule sends: 1 to 256 cookie
// characters (printable ASCII except space, '"', ',', ';', a backslash and
// '%').
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule="self.matches('^[\\\\x21\\\\x23\\\\x24\\\\x26-\\\\x2b\\\\x2d-\\\\x3a\\\\x3c-\\\\x5b\\\\x5d-\\\\x7e]+$')",message="a request.cookies value must be cookie characters: printable ASCII except space, '\"', ',', ';', a backslash and '%'"
type CookieValue string

// RequestModifier changes the request before the gateway forwards it.
// +kubebuilder:validation:XValidation:rule="!has(self.headers) || !has(self.removeHeaders) || self.removeHeaders.all(r, self.headers.all(k, k.lowerAscii().replace('_', '-').replace('.', '-') != r.lowerAscii().replace('_', '-').replace('.', '-')))",message="request names one header in headers and removeHeaders: which one applies would be undefined"
type RequestModifier struct {
	// headers to set on the request, replacing the client's values: at
	// most 8, names lower-case HTTP tokens of at most 64 characters, values
	// of 1 to 512 printable ASCII characters without '%' (Envoy reads %...% as a
	// command) and without spaces at either end. Headers that carry the
	// caller's identity, the request's routing or framing, or its trace
	// are refused (authorization, cookie, host, forwarded, via,
	// x-forwarded-*, x-real-ip, x-envoy-*, x-istio-*, x-jwt-*,
	// x-auth-request-*, x-ext-authz*, x-request-id, traceparent,
	// tracestate, b3, x-b3-*, content-length, transfer-encoding,
	// connection, upgrade and the like; the full list is in docs/api.md):
	// a tenant may not forge identity for a backend. Names are compared
	// as backends read them, with '_' and '.' as '-' (CGI, WSGI, Rack and
	// PHP read x_forwarded_for as x-forwarded-for), so no spelling gets
	// around the list, and two names that read as one are refused. Only
	// rules whose every backend is a Service of the APIRule's own
	// namespace may set headers or cookies (else InvalidRule): another
	// namespace's owner cannot read the APIRule.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 64 && k.matches('^[-a-z0-9!#$&\\\\x27*+.^_`|~]+$'))",message="request.headers names must be lower-case HTTP header names (letters, digits and !#$&'*+-.^_`|~) of at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, [k.lowerAscii().replace('_', '-').replace('.', '-')].all(n, !(n in ['authorization','proxy-authorization','cookie','host','forwarded','via','x-request-id','x-real-ip','x-client-trace-id','traceparent','tracestate','b3','x-ot-span-context','content-length','transfer-encoding','te','connection','upgrade','keep-alive','proxy-connection','trailer','expect']) && !n.startsWith('x-forwarded') && !n.startsWith('x-envoy') && !n.startsWith('x-b3') && !n.startsWith('x-istio') && !n.startsWith('x-jwt') && !n.startsWith('x-auth-request') && !n.startsWith('x-ext-authz') && !n.startsWith('x-portico')))",message="request.headers may not set a header that carries the caller's identity, the request's routing or framing, or its trace, in any spelling a backend reads as one of them ('_' or '.' for '-'): authorization, cookie (use request.cookies), host, forwarded, via, x-forwarded-*, x-real-ip, x-envoy-*, x-istio-*, x-jwt-*, x-auth-request-*, x-ext-authz*, x-portico-*, x-request-id, traceparent, tracestate, b3, x-b3-*, x-ot-span-context, x-client-trace-id, content-length, transfer-encoding, te, connection, upgrade, keep-alive, proxy-connection, trailer, expect"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.exists_one(j, j.lowerAscii().replace('_', '-').replace('.', '-') == k.lowerAscii().replace('_', '-').replace('.', '-')))",message="request.headers names one header twice: backends read '_' and '.' as '-' (x_api and x-api are one header), so which value they see would be undefined"
	Headers map[string]RequestHeaderValue `json:"headers,omitempty"`

	// cookies to send to the backend, as one cookie header that replaces
	// the client's cookies (as Kyma's APIRule does): at most 8, names of
	// at most 64 HTTP token characters, values of 1 to 256 cookie
	// characters (printable ASCII except space, '"', ',', ';', a backslash
	// and '%'), so that the header fits the Gateway API's 4096 characters.
	// Only rules whose every backend is a Service of the APIRule's own
	// namespace may send cookies (else InvalidRule): another namespace's
	// owner cannot read the APIRule.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 64 && k.matches('^[-A-Za-z0-9!#$&\\\\x27*+.^_`|~]+$'))",message="request.cookies names must be HTTP tokens (letters, digits and !#$&'*+-.^_`|~) of at most 64 characters"
	Cookies map[string]CookieValue `json:"cookies,omitempty"`

	// removeHeaders are request headers the gateway removes before it
	// forwards the request (such as a debug header clients must not
	// reach the backend with): at most 8 lower-case HTTP header names.
	// The headers request.headers may not set may not be removed either,
	// compared the same way ('_' and '.' as '-'): the mesh reads them
	// after the gateway (the backend's sidecar reads the token in
	// authorization and the client address in x-forwarded-for), so
	// removing one would change who the backend's access policy sees. The
	// rules of an APIRule remove at most 32 headers in all. The type is in
	// headers_types.go.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.lowerAscii().replace('_', '-').replace('.', '-') == a.lowerAscii().replace('_', '-').replace('.', '-')))",message="request.removeHeaders names one header twice ('_' and '.' read as '-')"
	RemoveHeaders []RemovedRequestHeader `json:"removeHeaders,omitempty"`
}

// NormalizeHeaderName is a request header's name as the gateway and the
// backends read it: lower-case (Envoy lower-cases header names, HTTP/2 and
// HTTP/3 require it, and every backend compares them regardless of case),
// with '_' and '.' read as '-'. Envoy forwards names with underscores by
// default (headers_with_underscores_action ALLOW), and a backend behind a
// CGI-style interface (CGI, WSGI, Rack, PHP, ...) reads a header as
// HTTP_<NAME> with '-' made '_', so x_forwarded_for arrives as
// HTTP_X_FORWARDED_FOR; PHP also turns '.' in a variable name into '_'.
// The CRD's CEL rules on request.headers normalize with the same
// replacements (k.lowerAscii().replace('_', '-').replace('.', '-')).
func NormalizeHeaderName(name string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case 'A' <= c && c <= 'Z':
			return c + ('a' - 'A')
		case c == '_' || c == '.':
			return '-'
		}
		return c
	}, name)
}

// IsReservedRequestHeader reports whether a rule may not set the header:
// one of ReservedRequestHeaders or with a ReservedRequestHeaderPrefixes
// prefix, in any spelling a backend reads as one of them
// (NormalizeHeaderName).
func IsReservedRequestHeader(name string) bool {
	name = NormalizeHeaderName(name)
	if slices.Contains(ReservedRequestHeaders, name) {
		return true
	}
	return slices.ContainsFunc(ReservedRequestHeaderPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// RewritePath is a path the backend receives instead of the client's: it
// starts with '/', holds URL path characters without '*', '%', '?' or '#',
// and no empty or dot segment ("//", "/./", "/../"), which the gateway and
// the backend's access policy could read differently.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule="self.matches('^/[-a-zA-Z0-9._~!$&()+,;=:@/]*$')",message="a rewrite must start with '/' and hold only URL path characters, without '*', '%', '?' or '#'"
// +kubebuilder:validation:XValidation:rule="!self.contains('//') && !self.contains('/./') && !self.contains('/../') && !self.endsWith('/.') && !self.endsWith('/..')",message="a rewrite may not have empty or dot segments ('//', '/./', '/../')"
type RewritePath string

// Rewrite changes the path the backend receives. The backend's access
// policy sees the rewritten path, so the controller allows the rule's
// callers on that path, and refuses a rewrite into a path another rule (of
// any APIRule on the same pods) guards with other authentication.
// +kubebuilder:validation:XValidation:rule="has(self.path) != has(self.prefix)",message="rewrite needs exactly one of path (the whole path) or prefix (the matched prefix)"
type Rewrite struct {
	// path replaces the whole path: "/orders" with path "/v2/orders"
	// sends /v2/orders; "/orders/*" sends every path under /orders/ to
	// this one path.
	// +optional
	Path RewritePath `json:"path,omitempty"`

	// prefix replaces the prefix of a prefix rule ("/orders/*"): with
	// prefix "/v2/orders/", /orders/42 becomes /v2/orders/42. It ends with
	// '/'; "/" drops the rule's prefix.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.endsWith('/')",message="rewrite.prefix must end with '/'"
	Prefix RewritePath `json:"prefix,omitempty"`
}
