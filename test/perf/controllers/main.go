// Command controllers is `make bench-controllers`: it measures how long the
// apirule and ratelimit controllers take to converge a large number of
// objects on a real, local control plane, and how much memory they need.
//
// It brings up the offline kwok cluster "portico-bench-ctrl"
// (hack/cluster.sh), installs Portico's CRDs, the real Istio CRDs of the
// istio.io/api module and the Gateway API's standard CRDs of the
// sigs.k8s.io/gateway-api module (before any controller starts, so the
// apirule controller starts with HTTPRoute mode on), removes what an
// earlier run left, and creates --namespaces namespaces, --gateways Istio
// Gateways in istio-system (each with its own selector) with one pod each
// that the selector picks (kwok plays it: a RateLimit acts only where a
// Gateway's pods run), a GatewayClass and --gateways Gateway API Gateways
// in istio-system (one HTTP listener admitting routes of every namespace),
// and 2 × --apirules headless Services with pod selectors (one per APIRule
// of either mode), spread over the namespaces. It waits until
// kube-controller-manager has written the Services' Endpoints and
// EndpointSlices, so that it does not load the API server during the
// measurement. Then, with no controller running yet:
//
//	(0) and (0h) the control plane's floor (floor.go). For the APIRules
//	    of (1), then of (1h), with --workers writers, the bench writes what
//	    the apirule controller would (controllers/apirule/golden): it
//	    creates the APIRule (the API server puts the controller's finalizer
//	    on: config/admission is installed, with a Deployment standing in
//	    for the operator's apirule-controller as its parameter) and then,
//	    as the controller's ServiceAccount, patches it once only if it has
//	    no finalizer (an annotation in its place), creates its golden
//	    objects and patches its status to the golden status (in
//	    HTTPRoute mode once the stand-in answered the route, as the
//	    controller does). Converged: (1)'s and (1h)'s trackers. It reports
//	    the time, CPU and the API requests made as the controller, then
//	    deletes what it wrote and waits until it is gone. Every APIRule
//	    phase is reported beside its floor as a ratio (ConvergenceOverFloor)
//	    and, from 100 APIRules on, the bench fails after its report when a
//	    phase took more than 1.3× its floor (up to 1,000 APIRules) or 1.5×.
//
// Then, one controller at a time:
//
//	(1) apirule. Starts bin/apirule-controller and waits for its /readyz.
//	    t0: just before the first of --apirules APIRules is created
//	    (--workers at a time, every other one with a JWT rule, so a
//	    RequestAuthentication too). Converged: every APIRule has Ready=True
//	    with observedGeneration == generation (in the condition and the
//	    status), and its VirtualService, AuthorizationPolicy and, for JWT
//	    rules, RequestAuthentication exist.
//	(1q) during (1): once the bench has seen a fifth of the bulk, one
//	    APIRule in a namespace of its own (bench-lone), timed from its
//	    create call to Ready; fails above 0.2× (1)'s convergence time from
//	    100 APIRules on.
//	(1r) restart: the apirule controller gets SIGTERM and starts again with
//	    everything in place; the bench waits for a reconcile of every
//	    APIRule and an idle controller, reports the times, requests and
//	    peak RSS, and fails on any write (POST, PUT, PATCH, DELETE).
//	(1e) --edits edits, one at a time, of random APIRules' spec.timeout,
//	    each timed from the patch call until the APIRule is Ready for its
//	    new generation and its VirtualService has a new generation;
//	    p50/p99/max, failing when p99 exceeds 20× p50 from 100 edits on.
//	(1h) apirule, HTTPRoute mode (the same controller process, idle after
//	    (1)). As many APIRules with the same rules, under other names and
//	    hosts, each naming a Gateway API Gateway (spec.parentRef) instead
//	    of an Istio Gateway. No Gateway API implementation runs on the kwok
//	    cluster, so the bench plays the Gateways' controller (standin.go):
//	    it watches the HTTPRoutes on them and writes each one's
//	    status.parents entry (Accepted and ResolvedRefs True at the route's
//	    generation, controllerName bench.portico.dev/gateway) with 4 writers
//	    and its own client, and reports its latency. Converged: every
//	    APIRule has Ready=True for its generation (which takes the
//	    Gateway's answer) and its HTTPRoute, AuthorizationPolicy and, for
//	    JWT rules, RequestAuthentication exist, and no VirtualService; once
//	    idle, the bench reads the APIRules and HTTPRoutes back from the API
//	    server (Applied, controlled by the APIRule, answered). It reports
//	    the ratios to (1) (convergence time, API requests per APIRule) and,
//	    from 100 APIRules on, fails when (1h) took more than 3 × (1)'s time.
//	(2) ratelimit. Starts bin/ratelimit-controller (the apirule controller
//	    keeps running) and waits for its /readyz. t0: just before the first
//	    of --ratelimits RateLimits is created, round-robin over the
//	    gateways: on even gateways two gateway-wide limits in istio-system
//	    (one Enforced, the other Conflicted) that also hold the pods against
//	    every route limit there (Conflicted); on odd gateways two limits of
//	    the same APIRule (one Enforced, one Conflicted) and then one per
//	    APIRule (Enforced; repeats once they are used up are Conflicted);
//	    everywhere one naming a missing APIRule (TargetNotFound). Converged:
//	    every RateLimit has a Ready condition for its generation with the
//	    reason its target calls for, every scope exactly one Enforced limit,
//	    and there is exactly one managed EnvoyFilter per gateway workload
//	    and RateLimit namespace, with one config patch per enforced scope
//	    (so its content is final too), and no other.
//
//	(3) noisy neighbour (issue #26; both controllers keep running).
//	    Team-b floods the controllers with --flood APIRules in its own
//	    namespace (five of them with 64 rules) and keeps updating them;
//	    team-a creates one APIRule at a time in another namespace, five
//	    times alone and five times under the flood, and the bench reports
//	    its time from the create call to Applied for its generation. The
//	    same for RateLimits (team-b's limit its APIRules and are updated
//	    without pause). It fails when team-a's worst wait under the flood
//	    exceeds half the time team-b's flood of APIRules took to converge
//	    (a ratio of the same run; a first-in-first-out queue makes team-a
//	    wait about that long), or when team-a's worst RateLimit wait under
//	    the flood exceeds twice its worst alone (the world is computed while
//	    team-b's writes go on, so the flood adds at most one computation of
//	    the world). Team-a's RateLimits under the flood are also reported
//	    over the ratelimit controller's mean computation of the world
//	    meanwhile (portico_ratelimit_world_seconds).
//
// Both are observed with the bench's own informers: the time of the event
// that completes the condition is the convergence time; nothing is polled.
// "create" is t0 until the last create call returned. Once converged, the
// bench waits until the controller's reconcile counter stands still (3 s),
// checks that the condition still holds and reports
// controller_runtime_reconcile_total and rest_client_requests_total from
// its /metrics, counted from the phase's start. Peak RSS is the kernel's high-water mark of the process
// (VmHWM, exact); peak heap is the largest go_memstats_heap_inuse_bytes
// sampled from /metrics every --sample (2 s; it can miss short spikes); both
// are the process's since it started, so (1h)'s cover (1) too. A scrape is
// not free for the process measured (the Go collector reads the runtime's
// memory statistics, the process collector reads /proc): every 250 ms it
// was 5–11 % of the CPU a phase reported (profiles of issue #45), a cost of
// the measurement that Prometheus, scraping every 15–60 s, does not add.
//
// The controllers run as their ServiceAccounts (config/rbac's accounts and
// roles, installed in portico-system; a kubeconfig that impersonates them),
// so API Priority and Fairness treats them as on a cluster: the admin is
// exempt. The bench first opens a watch on every CRD so that
// kube-apiserver's watch caches exist (it answers 429 until they are
// initialized), and fails when a ready controller was answered 429; it
// reports kube-apiserver's APF rejections and every 429 it served.
//
// Services are headless (clusterIP: None): the kwok cluster's service CIDR is
// kube-apiserver's default 10.0.0.0/24, too small for 1,000 ClusterIPs, and
// the controller only reads a Service's selector.
//
// It prints one table to stdout (progress goes to stderr), followed by notes
// per controller: the CPU time it, the bench, kube-apiserver, etcd and
// kube-controller-manager used until convergence and how busy the
// machine's CPUs were (other load on the machine skews every number: check
// that line first), its reconciles by result and its API requests by
// method. The results are written as PerfData to --output, with the
// machine (CPUs, CPU model, (0)'s time as its floor), and compared with
// --baseline (make bench-controllers BENCH_UPDATE_BASELINE=1 writes a new
// one): the report says how this machine's floor compares with the
// baseline's, and only machine-independent figures can fail the run: the
// ratios to the floor and between the modes, API requests (per object
// too), reconciles, the restart's requests, 429s and peak memory (the
// figures exempt from that, with their reasons, are in report.go's
// exemptions and printed under the report). Absolute times and CPU seconds
// are printed beside the baseline's as information. Every in-run bound is
// a ratio of the same run or a count, never a time. The controllers are stopped with SIGTERM at the end and the
// bench's objects are deleted (--keep leaves them); the cluster is left up
// for the next run unless --down is given; remove it with
// `hack/cluster.sh down portico-bench-ctrl`.
//
// `make bench-controllers-10k` runs it with 10,000 APIRules per mode in
// 500 namespaces against its own baseline.
//
// The short mode (TestShort, `make bench-short`) runs the same phases with
// 20 APIRules of each mode and 20 RateLimits over 2 gateways on a cluster
// of its own that it deletes, and fails unless all converge correctly; it
// asserts no timing.
//
// Usage (from the repository root; `make bench-controllers` builds the
// controllers first):
//
//	go run ./test/perf/controllers [--apirules 1000] [--ratelimits 1000] [--gateways 50] [--down]
package main

import (
	"context"
	"os"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

func main() {
	o := defaultOptions()
	fs := framework.NewBenchFlags("controllers", "Measures how long apirule-controller and ratelimit-controller take to converge many objects\n"+
		"on a local kwok cluster, and their peak memory.")
	o.addFlags(fs)
	framework.BenchMain(func(args []string) error { return framework.ParseBenchFlags(fs, args, o.valid) },
		func(ctx context.Context) error {
			_, err := run(ctx, o, os.Stdout)
			return err
		})
}
