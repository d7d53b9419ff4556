package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

const (
	// quietFor is how long a controller's reconcile counter must stand still
	// after convergence before its totals are read.
	quietFor = 3 * time.Second
	// reconcileTotal is controller-runtime's reconcile counter,
	// reconcileTime its histogram of reconcile durations.
	reconcileTotal = "controller_runtime_reconcile_total"
	reconcileTime  = "controller_runtime_reconcile_time_seconds"
)

// results are the bench's measurements, one per phase.
type results []result

// The modes of the APIRule phases.
const (
	modeIstio     = "Istio"
	modeHTTPRoute = "HTTPRoute"
)

// result is one phase: one controller converging one kind of objects.
type result struct {
	controller string
	// mode is the APIRules' mode (modeIstio, modeHTTPRoute), "" for
	// RateLimits.
	mode     string
	objects  string
	count    int
	create   time.Duration
	converge time.Duration
	// reconciles when converged and once the controller was idle, and
	// the controller's API requests by method once idle: all counted from
	// the phase's start (a controller may have run an earlier phase).
	reconcilesAtConvergence float64
	reconciles              float64
	requests                map[string]float64
	// peakRSS and peakHeap are the process's since it started, so
	// (1h)'s cover (1) too.
	peakRSS  float64 // VmHWM, bytes
	peakHeap float64 // bytes
	cpu      framework.CPUDelta
	notes    []string
	// fairness is the noisy-neighbour phase's figures for the kind.
	fairness *fairness
	// scale is what steady.go measures around (1), on its result.
	scale *scaleFigures
}

// controller is a running controller binary and its heap sampler.
type controller struct {
	*framework.Server
	heap *framework.PeakSampler
	// startup429 are the 429 answers the process got until ready.
	startup429 float64
}

// measure runs the phases: (1) on the apirule controller, then (1q)'s
// figure, (1r) and (1e) on it (steady.go), (1h) on it, (2) on the
// ratelimit controller, which starts after them (the apirule controller
// keeps running), then (3) on both. The controllers run as their
// ServiceAccounts (throttle.go). A bound that fails ends the run once
// every phase has run.
func (b *bench) measure(ctx context.Context) (res results, retErr error) {
	dir, err := os.MkdirTemp("", "portico-bench-kubeconfigs-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := b.prepareControllers(ctx, dir); err != nil {
		return nil, err
	}
	// (0) and (0h) first, while no controller runs.
	if res, err = b.measureFloors(ctx); err != nil {
		return nil, err
	}
	rejected0, err := apiServerRejections(ctx, b.conn.Config)
	if err != nil {
		return nil, err
	}
	lone, err := b.prepareLone(ctx)
	if err != nil {
		return nil, err
	}
	var gates []error
	gate := func(err error) { gates = append(gates, err) }
	throttled, startup := map[string]float64{}, map[string]float64{}
	running := map[string]*controller{}
	for _, step := range []struct {
		controller contract.Controller
		label      string
		phase      func() phase
		// after, when set, runs once the phase is done; it may replace
		// the controller's process.
		after func(*controller, *result) (*controller, error)
	}{
		{contract.APIRule, "(1)", func() phase {
			ph := b.apiRulePhase()
			ph.start = lone.start(ctx, b)
			return ph
		}, func(p *controller, r *result) (*controller, error) {
			return b.steadyState(ctx, p, r, lone, throttled, startup, gate)
		}},
		{contract.APIRule, "(1h)", b.routePhase, nil},
		{contract.RateLimit, "(2)", b.rateLimitPhase, nil},
	} {
		p := running[step.controller.Binary()]
		if p == nil {
			var err error
			p, err = b.startController(ctx, step.controller)
			if p != nil {
				running[step.controller.Binary()] = p
				// Every controller runs until the end (in a loop on
				// purpose); p is the last process of the controller.
				defer func() { retErr = errors.Join(retErr, p.stop()) }()
			}
			if err != nil {
				return nil, err
			}
		}
		r, err := b.runPhase(ctx, p, step.label, step.phase())
		if err != nil {
			return nil, err
		}
		res = append(res, r)
		if step.after != nil {
			next, err := step.after(p, &res[len(res)-1])
			if next != nil {
				p, running[step.controller.Binary()] = next, next
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if err := b.compareModes(ctx, res); err != nil {
		return res, err
	}
	res.noteFloors()
	if res, err = b.addFairness(ctx, res, running[contract.RateLimit.Binary()]); err != nil {
		return res, err
	}
	gate(b.addThrottling(ctx, res, running, throttled, startup, rejected0))
	return res, errors.Join(gates...)
}

// addFairness runs (3) and adds its figures to the Istio-mode APIRule and
// the RateLimit results; limiter is the ratelimit controller.
func (b *bench) addFairness(ctx context.Context, res results, limiter *controller) (results, error) {
	fair, err := b.measureFairness(ctx, limiter)
	if err != nil {
		return nil, fmt.Errorf("(3) noisy neighbour: %w", err)
	}
	for i, f := range fair {
		r := res.find(fairnessController(f.kind), "")
		if r == nil {
			return res, fmt.Errorf("no result of the %s controller for the noisy-neighbour figures", f.kind)
		}
		r.fairness = &fair[i]
		notes, err := fairnessNotes([]fairness{f}, b.opts.flood >= gatedFlood)
		r.notes = append(r.notes, notes...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// fairnessController is the controller of a kind of (3).
func fairnessController(kind string) string {
	if kind == kindRateLimit {
		return string(contract.RateLimit.Name)
	}
	return string(contract.APIRule.Name)
}

// find returns the result of the controller in mode ("" for no mode or
// Istio mode's), or nil.
func (res results) find(controller, mode string) *result {
	for i := range res {
		if res[i].controller == controller && (res[i].mode == mode || mode == "" && res[i].mode == modeIstio) {
			return &res[i]
		}
	}
	return nil
}

// prepareControllers readies the cluster for the controllers: the API
// server's watch caches of every kind they watch, their ServiceAccounts
// (kubeconfigs in dir) and the admission policy that sets the apirule
// controller's finalizer.
func (b *bench) prepareControllers(ctx context.Context, dir string) error {
	if err := b.warmWatchCaches(ctx); err != nil {
		return err
	}
	var err error
	if b.kubeconfigs, err = b.installServiceAccounts(ctx, dir); err != nil {
		return err
	}
	return b.installFinalizerPolicy(ctx)
}

// startController runs the controller's binary against the cluster and
// waits for its /readyz (CRDs found, workers' caches synced). A returned
// controller must be stopped, also with an error.
func (b *bench) startController(ctx context.Context, c contract.Controller) (*controller, error) {
	s, err := framework.StartServer(framework.ServerConfig{
		Name: c.Binary(), Binary: b.opts.binary(c),
		Args: []string{
			"--kubeconfig=" + b.kubeconfigs[c.Binary()],
			contract.Flag(contract.FlagLeaderElect, "false"),
			contract.Flag(contract.FlagLogLevel, b.opts.logLevel),
		},
		Pprof: b.opts.profiles.Dir != "",
		Env:   b.opts.memoryEnv(),
	})
	if err != nil {
		return nil, err
	}
	framework.Logf("%s started (pid %d), log: %s", c.Binary(), s.Pid(), s.LogPath)
	if env := b.opts.memoryEnv(); env != nil {
		framework.Logf("%s runs with a container memory limit of %s (%s): its soft memory limit is 90%% of it", c.Binary(), b.opts.memoryLimit.String(), env[0])
	}
	p := &controller{Server: s, heap: s.SamplePeak(b.opts.sample, func(m framework.Metrics) float64 {
		return m.Sum("go_memstats_heap_inuse_bytes", nil)
	})}
	if err := s.WaitReady(ctx, 2*time.Minute); err != nil {
		return p, err
	}
	return p, p.noteStartup(ctx)
}

func (p *controller) stop() error {
	p.heap.Stop()
	framework.Logf("stopping %s (SIGTERM)", p.Name)
	return p.Stop()
}

// phase is what one phase creates and how it decides convergence.
type phase struct {
	controller string
	mode       string
	objects    string
	objs       []client.Object
	tracker    tracker
	// start, when set, runs just before the first create call.
	start func()
	// note, when set, adds a line computed (under the bench's lock) at
	// convergence; t0 is the first create call.
	note func(t0 time.Time) string
	// verify, when set, checks the outcome once the controller is idle,
	// reading the API server.
	verify func(ctx context.Context) error
}

// profileDir is the folder of the phase's CPU profiles under
// --cpuprofile-dir: the controller's name, and the APIRules' mode for the
// apirule controller, whose two phases would otherwise write over each
// other's profiles.
func (ph phase) profileDir() string {
	if ph.mode == "" {
		return ph.controller
	}
	return ph.controller + "-" + strings.ToLower(ph.mode)
}

func (b *bench) apiRulePhase() phase {
	objs := make([]client.Object, 0, len(b.plan.apiRules))
	for _, r := range b.plan.apiRules {
		objs = append(objs, r)
	}
	tr := newAPIRuleTracker(b.plan.jwt, kindVirtualService)
	return phase{controller: string(contract.APIRule.Name), mode: modeIstio, objects: fmt.Sprintf("%d APIRules", len(objs)),
		objs: objs, tracker: tr, note: tr.timeline}
}

// routePhase is (1h): as many APIRules as (1), in HTTPRoute mode, on the
// Gateway API Gateways, whose controller the bench's stand-in plays.
func (b *bench) routePhase() phase {
	objs := make([]client.Object, 0, len(b.plan.routeRules))
	for _, r := range b.plan.routeRules {
		objs = append(objs, r)
	}
	tr := newAPIRuleTracker(b.plan.routeJWT, kindHTTPRoute)
	return phase{
		controller: string(contract.APIRule.Name), mode: modeHTTPRoute, objs: objs, tracker: tr,
		objects: fmt.Sprintf("%d APIRules (HTTPRoute mode)", len(objs)),
		start:   b.gateway.reset,
		note: func(t0 time.Time) string {
			return tr.timeline(t0) + "\n" + b.gateway.figures().String()
		},
		verify: b.verifyRoutes,
	}
}

func (b *bench) rateLimitPhase() phase {
	objs := make([]client.Object, 0, len(b.plan.rateLimits))
	for _, r := range b.plan.rateLimits {
		objs = append(objs, r)
	}
	tr := newRateLimitTracker(b.plan)
	return phase{
		controller: string(contract.RateLimit.Name), objs: objs, tracker: tr,
		objects: fmt.Sprintf("%d RateLimits / %d gateways", len(objs), len(b.plan.gateways)),
		note: func(time.Time) string {
			return fmt.Sprintf("verdicts at convergence: %s; %d EnvoyFilters", tr.verdicts(), len(tr.presentEF))
		},
	}
}

// runPhase creates the phase's objects as fast as the workers allow,
// waits until its tracker sees convergence and returns the measurement.
func (b *bench) runPhase(ctx context.Context, p *controller, label string, ph phase) (result, error) {
	framework.Logf("%s creating %s (%d workers)", label, ph.objects, b.opts.workers)
	done := b.setTracker(ph.tracker)
	cpu0 := b.cpu(p)
	profiles := b.opts.profiles
	if profiles.Dir != "" {
		profiles.Dir = filepath.Join(profiles.Dir, ph.profileDir())
	}
	before, err := p.Scrape(ctx)
	if err != nil {
		return result{}, err
	}
	profiles.Start(ctx, map[string]string{p.Name: p.PprofURL}, b.conn.Config)
	if ph.start != nil {
		ph.start()
	}
	t0 := time.Now()
	created, err := b.createAll(ctx, ph.objs)
	if err != nil {
		return result{}, err
	}
	framework.Logf("%s created in %.2fs; waiting for convergence", label, created.Seconds())
	if err := b.awaitConverged(ctx, done, p, label); err != nil {
		return result{}, err
	}
	res := result{controller: ph.controller, mode: ph.mode, objects: ph.objects, count: len(ph.objs), create: created,
		converge: done.at.Sub(t0), cpu: b.cpu(p).Since(cpu0)}
	res.notes = append(res.notes, "CPU until converged: "+res.cpu.String())
	framework.Logf("%s converged after %.2fs", label, res.converge.Seconds())
	if ph.note != nil {
		b.withTracker(func(tracker) { res.notes = append(res.notes, strings.Split(ph.note(t0), "\n")...) })
	}
	if err := b.finish(ctx, p, &res, before); err != nil {
		return result{}, err
	}
	if err := profiles.Wait(); err != nil {
		return result{}, err
	}
	var diverged string
	b.withTracker(func(tr tracker) {
		if !tr.converged() {
			diverged = tr.progress()
		}
	})
	if diverged != "" {
		return result{}, fmt.Errorf("%s converged, but no longer once %s was idle: %s", label, p.Name, diverged)
	}
	if ph.verify != nil {
		if err := ph.verify(ctx); err != nil {
			return result{}, fmt.Errorf("%s: %w", label, err)
		}
	}
	return res, nil
}

// cpu reads the CPU time of the controller (if any), the bench and the control
// plane (when the bench brought the cluster up).
func (b *bench) cpu(p *controller) framework.CPUSnapshot {
	pids := map[string]int{"bench": os.Getpid()}
	if p != nil { // nil: no controller runs (the floor)
		pids[p.Name] = p.Pid()
	}
	if b.conn.Cluster != nil {
		for name, pid := range b.conn.Cluster.ControlPlanePIDs() {
			pids[name] = pid
		}
	}
	return framework.TakeCPUSnapshot(pids)
}

// awaitConverged waits for the phase's completion, logging progress.
func (b *bench) awaitConverged(parent context.Context, done *completion, p *controller, label string) error {
	ctx, cancel := context.WithTimeout(parent, b.opts.Timeout)
	defer cancel()
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	progress := func() (s string) {
		b.withTracker(func(tr tracker) { s = tr.progress() })
		return s
	}
	for {
		select {
		case <-done.ch:
			return nil
		case <-ticker.C:
			reconciles := ""
			if m, err := p.Scrape(ctx); err == nil {
				reconciles = fmt.Sprintf(", %g reconciles", m.Sum(reconcileTotal, nil))
			}
			framework.Logf("%s %s%s", label, progress(), reconciles)
		case <-p.Done():
			return fmt.Errorf("%s exited during %s: %v (log: %s)", p.Name, label, p.Err(), p.LogPath)
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("%s interrupted: %s: %w", label, progress(), parent.Err())
			}
			return fmt.Errorf("%s did not converge within %s: %s (controller log: %s)", label, b.opts.Timeout, progress(), p.LogPath)
		}
	}
}

// finish waits until the controller is idle and fills in its counters
// (since before, the phase's start) and memory.
func (b *bench) finish(ctx context.Context, p *controller, res *result, before framework.Metrics) error {
	m, err := p.Scrape(ctx)
	if err != nil {
		return err
	}
	total := func(m framework.Metrics) float64 { return m.Sum(reconcileTotal, nil) }
	res.reconcilesAtConvergence = total(m) - total(before)
	if m, err = p.WaitSteady(ctx, quietFor, b.opts.Timeout, total); err != nil {
		return err
	}
	res.reconciles = total(m) - total(before)
	res.requests = since(m.ByLabel("rest_client_requests_total", "method"), before.ByLabel("rest_client_requests_total", "method"))
	usage, err := p.Usage()
	if err != nil {
		return err
	}
	res.peakRSS, res.peakHeap = float64(usage.PeakRSS), p.heap.Peak()
	res.notes = append(res.notes, reconcileNote(m, before, res), requestNote(res),
		fmt.Sprintf("RSS now %.1f MiB; log %s", framework.MiB(float64(usage.RSS)), p.LogPath))
	framework.Logf("%s idle: %g reconciles, peak RSS %.1f MiB, peak heap %.1f MiB", p.Name, res.reconciles,
		framework.MiB(res.peakRSS), framework.MiB(res.peakHeap))
	return nil
}

// since subtracts counters by label from before from now's.
func since(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
