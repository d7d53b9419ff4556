package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TargetKind is what a RateLimit applies to.
// +kubebuilder:validation:Enum=APIRule;Gateway
type TargetKind string

// The target kinds.
const (
	// TargetAPIRule limits the paths of an APIRule on its gateway.
	TargetAPIRule TargetKind = "APIRule"
	// TargetGateway limits every request through a gateway's workload: an
	// Istio Gateway, or a Gateway API Gateway (targetRef.group
	// gateway.networking.k8s.io).
	TargetGateway TargetKind = "Gateway"
)

// The API groups a targetRef may name.
const (
	// IstioNetworkingGroup is the API group of Istio's Gateway; an empty
	// targetRef.group means it for kind Gateway.
	IstioNetworkingGroup = "networking.istio.io"
	// PorticoGatewayGroup is the API group of APIRules; an empty
	// targetRef.group means it for kind APIRule.
	PorticoGatewayGroup = "gateway.portico.dev"
)

// GatewayNameLabel is the label Istio puts on the pods it deploys for a
// Gateway API Gateway, with the Gateway's name as value (Istio 1.21 and
// later; earlier releases used istio.io/gateway-name). The ratelimit
// controller selects those pods by it.
const GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// TargetReference names the object a RateLimit applies to, in the
// RateLimit's namespace.
// +kubebuilder:validation:XValidation:rule="!has(self.group) || size(self.group) == 0 || (self.kind == 'APIRule' ? self.group == 'gateway.portico.dev' : self.group != 'gateway.portico.dev')",message="group does not match kind: an APIRule is of group gateway.portico.dev; a Gateway of networking.istio.io (Istio's) or gateway.networking.k8s.io (the Gateway API's)"
// +kubebuilder:validation:XValidation:rule="!has(self.group) || self.group != 'gateway.networking.k8s.io' || size(self.name) <= 63",message="a Gateway API Gateway's name has at most 63 characters here: Istio labels the Gateway's pods with it (gateway.networking.k8s.io/gateway-name), and a label value has at most 63"
type TargetReference struct {
	// group of the target. For kind Gateway: empty or networking.istio.io
	// for an Istio Gateway, gateway.networking.k8s.io for a Gateway API
	// Gateway (whose pods Istio deploys and labels
	// gateway.networking.k8s.io/gateway-name). For kind APIRule: empty or
	// gateway.portico.dev.
	// +optional
	// +kubebuilder:validation:Enum="";networking.istio.io;gateway.networking.k8s.io;gateway.portico.dev
	Group string `json:"group,omitempty"`

	// kind of the target: APIRule, or Gateway (Istio's, or the Gateway
	// API's as group says).
	// +required
	Kind TargetKind `json:"kind"`

	// name of the target in the RateLimit's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// IsGatewayAPIGateway reports whether the target is a Gateway API Gateway.
func (t TargetReference) IsGatewayAPIGateway() bool {
	return t.Kind == TargetGateway && t.Group == GatewayAPIGroup
}

// IsIstioGateway reports whether the target is an Istio Gateway.
func (t TargetReference) IsIstioGateway() bool {
	return t.Kind == TargetGateway && (t.Group == "" || t.Group == IstioNetworkingGroup)
}

// TokenBucket is a local (per-proxy) token bucket.
// +kubebuilder:validation:XValidation:rule="self.tokensPerFill <= self.maxTokens",message="tokensPerFill must not exceed maxTokens"
type TokenBucket struct {
	// maxTokens is the bucket's capacity: the largest burst allowed.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	MaxTokens int64 `json:"maxTokens"`

	// tokensPerFill are added every fillInterval.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	TokensPerFill int64 `json:"tokensPerFill"`

	// fillInterval between refills; at least 1s.
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="fillInterval must be at least 1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="fillInterval must be at most 24h"
	FillInterval metav1.Duration `json:"fillInterval"`
}

// HeaderMatch matches a request header exactly.
type HeaderMatch struct {
	// name of the header.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_|~]+$`
	Name string `json:"name"`

	// value the header must have: at most 256 characters. The value is
	// rendered into the EnvoyFilter once for every route the limit covers,
	// so its length is bounded (see descriptors).
	// +required
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value"`
}

// Descriptor gives a bucket of its own to the requests it matches.
// +kubebuilder:validation:XValidation:rule="has(self.path) || has(self.header)",message="a descriptor needs a path, a header or both"
type Descriptor struct {
	// path prefix the request must start with: at most 256 characters,
	// rendered into the EnvoyFilter once for every route the limit covers.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must start with '/'"
	Path string `json:"path,omitempty"`

	// header the request must carry.
	// +optional
	Header *HeaderMatch `json:"header,omitempty"`

	// bucket of the matching requests; spec.local when empty. Descriptors
	// are local: they need spec.local.
	// +optional
	Bucket *TokenBucket `json:"bucket,omitempty"`
}

// RateLimitSpec is the desired limit.
// +kubebuilder:validation:XValidation:rule="has(self.local) || has(self.global)",message="a RateLimit needs local, global or both"
// +kubebuilder:validation:XValidation:rule="!has(self.descriptors) || size(self.descriptors) == 0 || has(self.local)",message="descriptors add local buckets: they need local"
type RateLimitSpec struct {
	// targetRef is the APIRule, Istio Gateway or Gateway API Gateway the
	// limit applies to, in the RateLimit's namespace.
	// +required
	TargetRef TargetReference `json:"targetRef"`

	// local is the default token bucket each gateway pod keeps for itself:
	// for an APIRule target, each of its paths gets one; for a Gateway
	// target, the whole gateway shares one. With N gateway pods the target
	// admits up to N times the bucket; use global for one budget across
	// every pod. Optional when global is set.
	// +optional
	Local *TokenBucket `json:"local,omitempty"`

	// global gives budgets shared by every pod of the target gateway, kept
	// by Portico's rate-limit service in Redis and optionally split per
	// client (a header's value, the client address, a validated JWT
	// claim). The administrator enables it (APIGateway
	// spec.rateLimits.global); until then a RateLimit with global reports
	// NotEnforced. local and global may be combined: a request must pass
	// both.
	// +optional
	Global *GlobalRateLimit `json:"global,omitempty"`

	// descriptors add buckets for requests matching a path or header: at
	// most 16, whose paths, header names and header values hold at most 512
	// characters together. For an APIRule target every descriptor is
	// rendered into the EnvoyFilter once per route, so these bounds keep one
	// RateLimit on an APIRule of 64 rules below the ratelimit controller's
	// EnvoyFilter size budget (768 KiB, half the API server's object size
	// limit of about 1.5 MiB).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(d, (has(d.path) ? size(d.path) : 0) + (has(d.header) ? size(d.header.name) + size(d.header.value) : 0)).sum() <= 512",message="the descriptors' paths, header names and header values may hold at most 512 characters together"
	Descriptors []Descriptor `json:"descriptors,omitempty"`

	// enforce rejects requests over the limit with 429; false only counts
	// them (shadow mode) so a limit can be tried safely.
	// +optional
	// +kubebuilder:default=true
	Enforce *bool `json:"enforce,omitempty"`

	// responseHeaders adds x-ratelimit-* headers to responses.
	// +optional
	// +kubebuilder:default=false
	ResponseHeaders *bool `json:"responseHeaders,omitempty"`
}

// RateLimitStatus is the observed state of a RateLimit.
type RateLimitStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions of the RateLimit, about its one target: Accepted and
	// Enforced follow the Gateway API's policy conventions (GEP-713):
	// Accepted is True (reason Accepted) when the target is found and no
	// older RateLimit holds the same scope, else False with reason
	// TargetNotFound, Conflicted or Invalid; Enforced is True (reason
	// Enforced) when the limit is in an EnvoyFilter written where the
	// target's pods run, else False with reason NotEnforced or
	// EnvoyFilterFailed. Ready sums both up with the one reason that
	// matters (Enforced, or why not).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// envoyFilters are the EnvoyFilters (namespace/name) that enforce this
	// limit: the one filter that holds the RateLimits of this namespace on
	// the gateway's pods. It lives in this namespace when all those pods run
	// here, else in Istio's root namespace (Istio applies an EnvoyFilter's
	// workloadSelector only to pods of its own namespace, of every namespace
	// from the root namespace); never in another tenant's namespace.
	// +optional
	// +listType=set
	EnvoyFilters []string `json:"envoyFilters,omitempty"`
}

// RateLimit applies rate limits to the workload of an
// Istio Gateway or of a Gateway API Gateway that Istio runs, or to an
// APIRule's paths (on an Istio Gateway, or in HTTPRoute mode on a Gateway
// API Gateway): local token buckets each gateway pod keeps (spec.local),
// global budgets every pod shares through Portico's rate-limit service
// (spec.global), or both. The ratelimit controller writes one
// EnvoyFilter per gateway workload and RateLimit namespace, so the
// RateLimits of one namespace never share a filter with another's: another
// namespace cannot stop, stale or remove them. A gateway-wide limit
// (targetRef.kind Gateway) acts only on the pods the Gateway selects in the
// RateLimit's namespace, so a tenant throttles only its own pods; with none
// there it reports NotEnforced. The pods of a Gateway API Gateway are those
// labelled gateway.networking.k8s.io/gateway-name: <name>, as Istio
// deploys them in the Gateway's namespace. A filter over the controller's
// size budget (768 KiB) is not written, and the RateLimits of its
// namespace report EnvoyFilterFailed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=portico
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.targetRef.kind`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.targetRef.group`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RateLimit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired limit.
	// +required
	Spec RateLimitSpec `json:"spec"`

	// status is written by the ratelimit controller.
	// +optional
	Status RateLimitStatus `json:"status,omitempty"`
}

// RateLimitList is a list of RateLimits.
//
// +kubebuilder:object:root=true
type RateLimitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RateLimit `json:"items"`
}

// GlobalRateLimit is a set of budgets shared by every pod of the target
// gateway.
type GlobalRateLimit struct {
	// rules each keep a budget (one per client when clientKeys are set). A
	// request counts against every rule that matches it and is refused
	// (429) when one of them is exhausted. At most 16.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Rules []GlobalRule `json:"rules"`
}

// RateLimitUnit is the unit of time a global limit counts requests in.
// +kubebuilder:validation:Enum=Second;Minute;Hour;Day
type RateLimitUnit string

// The units of a global limit.
const (
	UnitSecond RateLimitUnit = "Second"
	UnitMinute RateLimitUnit = "Minute"
	UnitHour   RateLimitUnit = "Hour"
	UnitDay    RateLimitUnit = "Day"
)

// RateLimitAlgorithm is how a global budget refills.
// +kubebuilder:validation:Enum=FixedWindow;TokenBucket
type RateLimitAlgorithm string

// The algorithms of a global limit.
const (
	// AlgorithmFixedWindow admits `requests` in each calendar window of one unit
	// (a minute starts at :00): simple, and a client may send up to twice
	// the limit across a window boundary.
	AlgorithmFixedWindow RateLimitAlgorithm = "FixedWindow"
	// AlgorithmTokenBucket refills `requests` tokens evenly over each unit into a
	// bucket of `burst` tokens: smooth, with bursts bounded by `burst`.
	AlgorithmTokenBucket RateLimitAlgorithm = "TokenBucket"
)

// GlobalRule is one global budget: which requests count against it, how
// it is split per client, and how many it admits per unit of time.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || self.algorithm == 'TokenBucket'",message="burst is the size of a token bucket: it needs algorithm TokenBucket"
type GlobalRule struct {
	// name of the rule, unique in the RateLimit. It names the budget in the
	// rate-limit service's counters and metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// match restricts the rule to requests with a path prefix, a header
	// value or both. Not set: every request through the target.
	// +optional
	Match *GlobalMatch `json:"match,omitempty"`

	// clientKeys split the budget: every distinct combination of their
	// values gets a budget of its own (per user, per API key, per client
	// address). Requests that lack a value (no such header, no validated
	// token with the claim) share one budget of their own, so a client
	// cannot escape the rule by leaving a value out or sending it under
	// another name. Not set: one budget shared by every matching request.
	// At most 4. The rate-limit service keeps at most the administrator's
	// maxKeysPerRule budgets per rule and window; the clients beyond share
	// one more.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	ClientKeys []ClientKey `json:"clientKeys,omitempty"`

	// requests admitted per unit (per client key when clientKeys are set).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	Requests int64 `json:"requests"`

	// unit of time requests are counted in: Second, Minute, Hour or Day.
	// +required
	Unit RateLimitUnit `json:"unit"`

	// algorithm of the budget: FixedWindow (default) counts in calendar
	// windows of one unit; TokenBucket refills continuously.
	// +optional
	// +kubebuilder:default=FixedWindow
	Algorithm RateLimitAlgorithm `json:"algorithm,omitempty"`

	// burst is the token bucket's capacity (TokenBucket only): the most
	// requests admitted at once after a quiet period. Default: requests.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	Burst *int64 `json:"burst,omitempty"`
}

// GlobalMatch selects the requests a global rule counts.
// +kubebuilder:validation:XValidation:rule="has(self.path) || has(self.header)",message="a match needs a path, a header or both"
type GlobalMatch struct {
	// path prefix the request must start with.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must start with '/'"
	Path string `json:"path,omitempty"`

	// header the request must carry with exactly this value.
	// +optional
	Header *HeaderMatch `json:"header,omitempty"`
}

// ClientKeyType is what splits a global budget per client.
// +kubebuilder:validation:Enum=Header;ClientAddress;JWTClaim
type ClientKeyType string

// The client key types.
const (
	// ClientKeyHeader keys the budget by a request header's value, as the
	// client sent it: right for an API key the backend or an authorizer
	// checks, never for an identity (use JWTClaim).
	ClientKeyHeader ClientKeyType = "Header"
	// ClientKeyClientAddress keys the budget by the client's address as
	// the gateway trusts it (the connection's peer, or the address
	// X-Forwarded-For gives through the mesh's trusted proxies).
	ClientKeyClientAddress ClientKeyType = "ClientAddress"
	// ClientKeyJWTClaim keys the budget by a claim of a token the gateway
	// validated (an APIRule's jwt rules, Istio's RequestAuthentication): it
	// is read from what Istio records after validation, never from a
	// header a client could send.
	ClientKeyJWTClaim ClientKeyType = "JWTClaim"
)

// ClientKey is one value that splits a global budget per client.
// +kubebuilder:validation:XValidation:rule="self.type == 'Header' ? has(self.header) : !has(self.header)",message="header is set exactly when type is Header"
// +kubebuilder:validation:XValidation:rule="self.type == 'JWTClaim' ? has(self.claim) : !has(self.claim)",message="claim is set exactly when type is JWTClaim"
type ClientKey struct {
	// type of the key: Header, ClientAddress or JWTClaim.
	// +required
	Type ClientKeyType `json:"type"`

	// header whose value keys the budget (type Header). Compared as the
	// gateway reads it: case-insensitive.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_|~]+$`
	Header string `json:"header,omitempty"`

	// claim of a validated JWT that keys the budget (type JWTClaim).
	// +optional
	Claim *JWTClaimKey `json:"claim,omitempty"`
}

// JWTClaimKey names a claim of the tokens of one issuer.
type JWTClaimKey struct {
	// issuer of the tokens (their iss claim), as in the jwt rules that
	// validate them.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Issuer string `json:"issuer"`

	// name of the claim (sub, client_id, …); a top-level claim whose value
	// is a string, number or boolean.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:-]+$`
	Name string `json:"name"`
}
