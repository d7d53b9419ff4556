// Package v1alpha1 holds the gateway.portico.dev/v1alpha1 API served by
// Portico's gateway controllers: APIRule (expose a Service through an Istio
// Gateway with per-path access rules) and RateLimit (local token-bucket
// limits for a gateway or an APIRule's paths).
//
// The package only declares types, validation and the documented condition
// reasons; the controllers under controllers/ give them behaviour.
//
// +kubebuilder:object:generate=true
// +groupName=gateway.portico.dev
package v1alpha1
