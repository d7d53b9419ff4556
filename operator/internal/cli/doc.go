// Package cli is the portico-operator command line: the root command runs
// the operator (manager, caches, reconciler, probes, metrics, leader
// election); `version`, `catalog` and `preflight` answer questions without
// running it. The package wires flags to the other packages and holds no
// reconcile logic of its own.
package cli
