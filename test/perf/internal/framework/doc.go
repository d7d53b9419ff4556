// Package framework is the machinery of the benchmarks of test/perf and
// of nothing else: the bench flags and main (BenchOptions, BenchMain), the
// kwok cluster a bench brings up and its connection, the CRDs it installs,
// Measure with its informers, the Portico binaries it runs as servers
// (their metrics, CPU and memory usage, pprof profiles), the short mode of
// `make bench-short`, and the PerfData a bench publishes and compares with
// its baseline, with the tables people read. The comparison gates only
// machine-independent figures (gate.go: ratios of the same run, counts,
// memory) and prints times and CPU seconds as information; a PerfData
// records its Machine (CPUs, CPU model, the floor's time) so that a report
// says how this machine's speed compares with the baseline's.
//
// Host processes, the e2e target and impersonating kubeconfigs, which the
// e2e and tenancy suites use too, stay in test/framework.
package framework
