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
	// TargetGateway limits every request through an Istio Gateway's workload.
	TargetGateway TargetKind = "Gateway"
)

// TargetReference names the object a RateLimit applies to, in the
// RateLimit's namespace.
type TargetReference struct {
	// kind of the target: APIRule or Gateway (an Istio networking Gateway).
	// +required
	Kind TargetKind `json:"kind"`

	// name of the target in the RateLimit's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
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

	// bucket of the matching requests; spec.local when empty.
	// +optional
	Bucket *TokenBucket `json:"bucket,omitempty"`
}

// RateLimitSpec is the desired limit.
type RateLimitSpec struct {
	// targetRef is the APIRule or Istio Gateway the limit applies to.
	// +required
	TargetRef TargetReference `json:"targetRef"`

	// local is the default token bucket: for an APIRule target, each of its
	// paths gets one; for a Gateway target, the whole gateway shares one.
	// +required
	Local TokenBucket `json:"local"`

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

	// conditions of the RateLimit; Ready carries one of the documented reasons.
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

// RateLimit applies local token-bucket rate limits to an Istio Gateway's
// workload or to an APIRule's paths. The ratelimit controller writes one
// EnvoyFilter per gateway workload and RateLimit namespace, so the
// RateLimits of one namespace never share a filter with another's: another
// namespace cannot stop, stale or remove them. A gateway-wide limit
// (targetRef.kind Gateway) acts only on the pods the Gateway selects in the
// RateLimit's namespace, so a tenant throttles only its own pods; with none
// there it reports NotEnforced. A filter over the controller's
// size budget (768 KiB) is not written, and the RateLimits of its
// namespace report EnvoyFilterFailed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=portico
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.targetRef.kind`
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
