// Package v1alpha1 holds the operator.portico.dev/v1alpha1 API: the
// cluster-scoped APIGateway resource through which a platform engineer
// chooses which Portico gateway controllers run and how, and through which
// the operator reports each controller's readiness.
//
// The package only declares types, defaults, validation markers and the
// documented condition reasons; it holds no behaviour. Every constant that
// appears in status (states, phases, reasons) is declared here so that
// clients can switch on it.
//
// +kubebuilder:object:generate=true
// +groupName=operator.portico.dev
package v1alpha1
