package v1alpha1

import (
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
