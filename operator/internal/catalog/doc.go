// Package catalog declares, as data, the gateway controllers the operator
// can run: each entry names its binary, the CRDs (with versions) it needs,
// the controllers it depends on and its default settings.
//
// Adding a controller to Portico is one entry here, one binary under
// controllers/, and its RBAC. The package holds no behaviour beyond checking
// that the catalog is well-formed (unique names, valid CRD references, an
// acyclic dependency graph) and ordering entries so that dependencies come
// first. It must not talk to a cluster.
package catalog
