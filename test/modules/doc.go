// Package modules checks a property of the tree's Go modules that no
// compiler checks: the modules `make test` compiles (the product, the
// release tooling, the e2e suite, test/monitoring and test/istio) require
// one version of every module they share. Go's build cache keys a package's
// compile on its dependencies' content, so one module one patch version
// apart (golang.org/x/net, grpc, client-go) makes every package above it
// compile once per version on a cold build. Aligned (issue 44), the
// Prometheus server's build compiles 13 MB of Go source of its own instead
// of 44 MB, the rest being the product's packages.
package modules
