// Command operator is `make bench`: it measures how fast portico-operator
// reacts on a real, local control plane and how quiet it is when nothing
// changes.
//
// It brings up the offline kwok cluster "portico-bench" (hack/cluster.sh),
// installs Portico's CRDs and the real Istio CRDs of the istio.io/api
// module, the namespace, the controllers' ServiceAccounts and the
// APIGateway "default", then starts bin/portico-operator as a child process
// (metrics and probes on free loopback ports) and waits for its /readyz. The
// bench timestamps every event it measures in the handlers of its own
// informers; it never polls for a measured event.
//
//	(a) CRD Established -> Deployment created. Delete the EnvoyFilter CRD,
//	    wait until ratelimit-controller is gone and the CRD is removed,
//	    create the CRD again. t0: the bench's CRD watch sees
//	    Established=True on the new CRD; t1: its Deployment watch sees
//	    ratelimit-controller Added.
//	(b) Deployment deleted -> recreated. t0: the delete call for
//	    apirule-controller returned; t1: the Deployment watch sees an
//	    apirule-controller with a new UID.
//	(c) CRD deleted -> Deployment gone. t0: the delete call for the
//	    EnvoyFilter CRD returned (the API server has set its
//	    deletionTimestamp; the CRD itself is removed later, after the API
//	    server's finalizer); t1: the Deployment watch sees
//	    ratelimit-controller Deleted. (a) and (c) come from the same cycles.
//	(a) and (c) floor: in the same cycles, the bench itself reacts to the
//	    event the operator reacts to with the write the operator makes: it
//	    creates the Deployment portico-bench-floor as soon as its watch
//	    sees the CRD Established, and deletes it as soon as its watch sees
//	    the CRD terminating; t1 is its Deployment watch seeing that write.
//	    A watch delivery, one write and a watch delivery, side by side with
//	    the operator's on the same API server: the table prints each p99
//	    over its floor's (information: a p99 of 30 samples is their
//	    maximum, which one pause of the API server sets).
//	(d) API writes in steady state: once everything is Ready and the
//	    operator's write counter has not moved for --quiet, the delta of
//	    rest_client_requests_total{method!="GET"} on the operator's /metrics
//	    over --steady.
//
// The bench and the operator see the same watch events, so in (a) the bench
// may see Established a little after the operator did (rarely, t1 < t0 by
// a fraction of a millisecond). (a) excludes the API server's own time from
// creating a CRD to Established (tens of ms; --verbose shows it).
//
// Between two cycles the bench waits until the APIGateway is Ready again and
// every Deployment is available, so cycles do not overlap, and before it
// deletes the CRD it lists EnvoyFilters once, so the API server has built
// the CRD's storage, as istiod's watch would on a real cluster (see
// waitCRDServing). p99 is the nearest-rank percentile: with fewer than 100
// cycles it is the maximum. --verbose prints each cycle's timeline, with
// times comparable to the operator's log (a temporary file, named on
// stderr).
//
// It prints one table to stdout (progress goes to stderr). Targets are
// reported as PASS/FAIL, not enforced; the results are written as PerfData
// to --output, with the machine's CPUs and model, and compared with
// --baseline (make bench BENCH_UPDATE_BASELINE=1 writes a new one). Only
// the steady-state writes, a count, can fail the run (beyond --tolerance);
// the reaction times are absolute times of this machine, printed beside
// the baseline's as information. The operator is stopped with SIGTERM at the
// end; the cluster is left up for the next run (reusing it is fast) unless
// --down is given; remove it with `hack/cluster.sh down portico-bench`.
//
// The short mode (TestShort, `make bench-short`) runs two cycles of each on
// a cluster of its own that it deletes, and fails unless the operator
// reacts every time and writes nothing in steady state; it asserts no
// timing.
//
// Usage (from the repository root; `make bench` builds the operator first):
//
//	go run ./test/perf/operator [--cycles 30] [--steady 60s] [--down]
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

type options struct {
	framework.BenchOptions
	cycles int
	steady time.Duration
	// quiet is how long the operator's write counter must stand still
	// before the steady-state window opens: by default longer than
	// client-go's event recorder waits before it retries a failed Event
	// write (10 s + 25% jitter), so an Event of the last cycle does not
	// count as steady state.
	quiet     time.Duration
	operator  string
	namespace string
	verbose   bool
	// operatorFlags are extra flags for the operator (diagnostics).
	operatorFlags []string
}

func defaultOptions() options {
	return options{
		BenchOptions: framework.BenchOptions{
			Cluster: "portico-bench", Timeout: 30 * time.Second, Tolerance: framework.DefaultTolerance.Relative,
			Output: "bin/perf/operator.json", Baseline: "test/perf/baseline/operator.json",
		},
		cycles: 30, steady: 60 * time.Second, quiet: 15 * time.Second,
		operator: "bin/portico-operator", namespace: "portico-system",
	}
}

// addFlags registers the command's flags on fs.
func (o *options) addFlags(fs *flag.FlagSet) {
	o.AddFlags(fs)
	fs.IntVar(&o.cycles, "cycles", o.cycles, "measured cycles for each of (a)+(c) and (b)")
	fs.DurationVar(&o.steady, "steady", o.steady, "length of the steady-state window of (d)")
	fs.DurationVar(&o.quiet, "quiet", o.quiet, "how long the operator's writes must stand still before (d) starts")
	fs.StringVar(&o.operator, "operator", o.operator, "operator binary, as make build writes it")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "namespace of the operator's Deployments")
	fs.BoolVar(&o.verbose, "verbose", o.verbose, "print every cycle's timeline (ms after t0) to stderr")
	fs.Func("operator-flag", "extra operator flag, repeatable (e.g. --operator-flag=--zap-log-level=5 logs every reconcile)", func(v string) error {
		o.operatorFlags = append(o.operatorFlags, v)
		return nil
	})
}

func main() {
	o := defaultOptions()
	fs := framework.NewBenchFlags("operator", "Measures portico-operator's reaction times and steady-state API writes on a local kwok cluster.")
	o.addFlags(fs)
	valid := func() bool { return o.cycles > 0 && o.steady > 0 && o.quiet >= 0 && o.Timeout > 0 }
	framework.BenchMain(func(args []string) error { return framework.ParseBenchFlags(fs, args, valid) },
		func(ctx context.Context) error {
			_, err := run(ctx, o, os.Stdout)
			return err
		})
}
