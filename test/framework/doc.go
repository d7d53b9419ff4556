// Package framework is the machinery the e2e suite and the tenancy suite
// share: the e2e target (local, kind, node) and running commands from the
// repository's top directory, host processes with their output in a log
// file (StartProcess, Process, ServingAddrs), kubeconfigs that impersonate
// ServiceAccounts, and the hostlet that runs controller Deployments as host
// processes on the local target. It asserts nothing; the specs do.
//
// What only the benchmarks use (kwok clusters, measurements, PerfData,
// profiles, bench flags) is in test/perf/internal/framework.
package framework
