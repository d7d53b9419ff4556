// Package istiocorpus holds only a test: it writes the objects the gateway
// controller writes for the default gateway, in both modes, for test/istio,
// which judges them with Istio's own code and cannot import the
// controller's internal package. It must not be imported.
package istiocorpus
