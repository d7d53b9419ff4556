// Package istio judges what Portico writes with Istio's own code, offline:
// every golden file of the apirule controller (both modes) and a corpus of
// fuzz-drawn APIRules translated by the controller's translation
// (TestIstioCorpus in controllers/apirule/internal/translate) are put
// through istiod's validating webhook, its Gateway API conversion with a
// GatewayClass istio, and its Envoy configuration generation, and the
// tenancy judge's verdicts (test/tenancy/judge) are checked against the
// Envoy configuration istiod generates from the same objects.
//
// It is a module of its own so that the product module never requires
// istio.io/istio; it pins one istio.io/istio version, whose Istio release
// docs/architecture.md names. It holds tests only and writes nothing but
// temporary files.
package istio
