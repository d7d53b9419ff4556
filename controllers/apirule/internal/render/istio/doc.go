// Package istio renders a checked plan (package plan) as Istio objects:
// the VirtualService of Istio mode, and for every workload in the APIRule's
// namespace its ALLOW AuthorizationPolicy, its CUSTOM AuthorizationPolicy
// (extAuth rules only) and its RequestAuthentication (jwt rules only). It
// refuses nothing, reads nothing from the cluster and compares nothing: a
// rule feature is a few lines here reading one plan field.
package istio
