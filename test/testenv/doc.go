// Package testenv is test support shared by Portico's envtest suites. Run
// is the one way a test package starts envtest: its TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.RunInput{…})) }
//
// and RunInput says which CRDs to install (Portico's, Istio's,
// cert-manager's, the Gateway API's, the test's own), which API groups the
// client knows (Scheme, the one scheme of the tests) and what to set up
// once the control plane runs. One control plane serves a package's tests.
//
// The rest supports it and the other suites: it finds (building when
// needed) the locally built control-plane binaries, loads CRD manifests
// from the repository and from Go modules (the real Istio CRDs of
// istio.io/api, cert-manager's, the Gateway API's), and runs kubectl
// explain against the environment (Env.Explain).
//
// It exists so `go test ./...` works from an editor without setting
// KUBEBUILDER_ASSETS. It must only be imported from tests.
package testenv
