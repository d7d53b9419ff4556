// Package testenv is test support shared by Portico's envtest suites: it
// finds (building when needed) the locally built control-plane binaries,
// loads CRD manifests from the repository and from Go modules (the real
// Istio CRDs of istio.io/api, cert-manager's), and starts an envtest
// environment with the project's CRDs installed: Start returns it running,
// with a client of a scheme Scheme builds.
//
// It exists so `go test ./...` works from an editor without setting
// KUBEBUILDER_ASSETS. It must only be imported from tests.
package testenv
