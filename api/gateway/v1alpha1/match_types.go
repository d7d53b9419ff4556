package v1alpha1

import (
	"slices"
	"strings"
)

// MaxRuleMatches is the most header and query-parameter matches one rule
// may have in all, which keeps an APIRule at its bounds within one etcd
// object.
const MaxRuleMatches = 8

// MaxMatchRegexProgram bounds the compiled size of a match's regular
// expression (Go's RE2 program, in instructions): Envoy refuses a route
// whose RE2 program is too large, and one refused route would hold back
// the gateway's routes of every tenant.
const MaxMatchRegexProgram = 1000

// IgnoredMatchHeaders are header names a rule may not match on: Istio's
// VirtualService ignores matches on uri, scheme, method and authority, and
// Envoy keeps the host as :authority, so the two outputs would route such
// a request differently.
var IgnoredMatchHeaders = []string{"uri", "scheme", "method", "authority", "host"}

// RequestMatch narrows a rule to the requests that also carry the listed
// headers and query parameters. It selects a route, never access: the
// backend's access policy cannot see it.
// +kubebuilder:validation:XValidation:rule="has(self.headers) || has(self.queryParams)",message="match needs headers, queryParams or both; leave match out to match every request on the path"
// +kubebuilder:validation:XValidation:rule="(has(self.headers) ? self.headers.size() : 0) + (has(self.queryParams) ? self.queryParams.size() : 0) <= 8",message="a rule matches at most 8 headers and query parameters in all"
type RequestMatch struct {
	// headers the request must carry, each with a value matched exactly,
	// by prefix or by an RE2 regular expression (all of them must match).
	// At most 8; names are lower-case HTTP header names of at most 128
	// characters, other than uri, scheme, method, authority and host.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Headers []RuleHeaderMatch `json:"headers,omitempty"`

	// queryParams the request's URL must carry, each with a value matched
	// exactly or by an RE2 regular expression (all of them must match; no
	// prefix: Istio does not match query parameters by prefix). At most 8;
	// names are URL-safe (letters, digits and -._~) of at most 128
	// characters. Values are compared as sent, without percent-decoding.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	QueryParams []RuleQueryParamMatch `json:"queryParams,omitempty"`
}

// RuleHeaderMatch is one header a request must carry.
// +kubebuilder:validation:XValidation:rule="(has(self.exact) ? 1 : 0) + (has(self.prefix) ? 1 : 0) + (has(self.regex) ? 1 : 0) == 1",message="a header match needs exactly one of exact, prefix or regex"
// +kubebuilder:validation:XValidation:rule="!(self.name in ['uri', 'scheme', 'method', 'authority', 'host'])",message="a header match may not name uri, scheme, method, authority or host: Istio ignores or rewrites them, so the request would not be matched as written"
type RuleHeaderMatch struct {
	// name of the header, lower-case (headers are matched regardless of
	// case), at most 128 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[-a-z0-9!#$&'*+.^_|~]+$`
	Name string `json:"name"`

	// exact value of the header: 1 to 256 printable ASCII characters
	// without spaces at either end.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[!-~]([ -~]*[!-~])?$`
	Exact string `json:"exact,omitempty"`

	// prefix the header's value starts with: 1 to 256 printable ASCII
	// characters without a space at the start. In HTTPRoute mode it becomes
	// a regular expression, the prefix quoted and followed by ".*".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[!-~][ -~]*$`
	Prefix string `json:"prefix,omitempty"`

	// regex the whole header value must match: an RE2 regular expression
	// of at most 256 printable ASCII characters. The API server cannot
	// compile it; the controller refuses one that RE2 does not accept, or
	// whose compiled program is too large for Envoy (reason InvalidRule).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[ -~]+$`
	Regex string `json:"regex,omitempty"`
}

// RuleQueryParamMatch is one query parameter a request's URL must carry.
// +kubebuilder:validation:XValidation:rule="!has(self.prefix)",message="a query parameter cannot be matched by prefix: Istio matches query parameters exactly or by regex; use regex with the prefix followed by .*"
// +kubebuilder:validation:XValidation:rule="has(self.exact) != has(self.regex)",message="a query parameter match needs exactly one of exact or regex"
type RuleQueryParamMatch struct {
	// name of the query parameter (case-sensitive): letters, digits and
	// -._~, at most 128 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._~-]+$`
	Name string `json:"name"`

	// exact value of the parameter as sent: 1 to 256 URL-safe characters
	// (letters, digits and -._~), so that no percent-encoding can make the
	// same value look different.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._~-]+$`
	Exact string `json:"exact,omitempty"`

	// prefix is not supported for query parameters (Istio has no prefix
	// match for them); it is here to be refused with a clear message.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Prefix string `json:"prefix,omitempty"`

	// regex the whole value, as sent, must match: an RE2 regular
	// expression of at most 256 printable ASCII characters, compiled by the
	// controller (reason InvalidRule if RE2 refuses it or it is too large).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[ -~]+$`
	Regex string `json:"regex,omitempty"`
}

// Key is a canonical text of the match, equal for two matches that select
// the same requests as written (names sorted); "" without a match.
func (m *RequestMatch) Key() string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, h := range m.Headers {
		parts = append(parts, "header "+strings.ToLower(h.Name)+" "+matchKind(h.Exact, h.Prefix, h.Regex))
	}
	for _, q := range m.QueryParams {
		parts = append(parts, "query "+q.Name+" "+matchKind(q.Exact, q.Prefix, q.Regex))
	}
	slices.Sort(parts)
	return strings.Join(parts, "\n")
}

func matchKind(exact, prefix, regex string) string {
	switch {
	case exact != "":
		return "exact=" + exact
	case prefix != "":
		return "prefix=" + prefix
	default:
		return "regex=" + regex
	}
}
