package v1alpha1

// MaxWeightedBackends is the most backends one rule may split its requests
// between.
const MaxWeightedBackends = 8

// WeightedBackend is one of the Services a rule splits its requests
// between, with its share of them.
type WeightedBackend struct {
	// service receives this backend's share of the rule's requests. It
	// passes the same checks as a rule's service: an ordinary Service whose
	// selector picks pods of its own namespace (reason BackendNotPermitted
	// otherwise), and consent from a Service of another namespace (reason
	// ReferenceNotPermitted otherwise). A refused backend refuses the whole
	// APIRule.
	// +required
	Service ServiceReference `json:"service"`

	// weight is the percentage of the rule's requests this backend
	// receives, from 0 to 100; the weights of a rule add up to 100. A
	// backend of weight 0 receives no requests but keeps its access policy,
	// so a canary can be drained and resumed without a gap.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
}
