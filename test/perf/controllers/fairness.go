package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// The noisy-neighbour phase (issue #26): team-b ("bench-noisy") floods the
// controllers with --flood APIRules (a few of them at the maximum size)
// and keeps updating them, then with --flood RateLimits, also updated
// without pause; meanwhile team-a ("bench-quiet") creates one object at a
// time and the bench measures the time from its create call until its
// Ready condition is for its generation (the informer event that shows
// it). Each is measured alone first (the same objects, no flood, once
// the machine worked off what came before: settle), then under the flood.
// The bench fails when, under the flood, team-a waits more than
// maxFloodShare of the time team-b's own flood (of the same kind) took to
// converge: a first-in-first-out queue makes it wait about that long.
const (
	quietNS = "bench-quiet"
	noisyNS = "bench-noisy"
	// samples is the number of team-a objects measured per condition.
	samples = 5
	// largeAPIRules of the flood have maxRules rules each.
	largeAPIRules = 5
	maxRules      = 64
	// maxFloodShare bounds team-a's worst wait under the flood, as a share
	// of the flood's own convergence time (the same run's figures).
	maxFloodShare = 0.5
)

// fairness is the noisy-neighbour phase's figures.
type fairness struct {
	kind string
	// alone and flooded are team-a's times to Ready, in the order measured.
	alone, flooded []time.Duration
	// floodConverged is how long team-b's objects took to converge, from
	// the flood's start: APIRules each Applied for its generation at some
	// moment while the flood goes on; RateLimits every one Ready for its
	// last generation once the flood stopped (after team-a's samples).
	floodConverged time.Duration
	// worldReconcile is the ratelimit controller's mean reconcile of its
	// one key (the world) while team-a's RateLimits waited under the
	// flood, and worldReconciles their number.
	worldReconcile  time.Duration
	worldReconciles float64
}

// The ratios of (3), of the same run: team-a's worst wait under the flood
// over what the flood's own work took (its convergence; for RateLimits
// also one world reconcile), and over team-a's worst wait alone (the
// machine's load under the flood is in it: information).
const (
	ratioFloodConvergence = "FloodedMaxOverFloodConvergence"
	ratioWorldReconcile   = "FloodedMaxOverWorldReconcile"
	ratioWorldMedian      = "FloodedMedianOverWorldReconcile"
	ratioAlone            = "FloodedMaxOverAloneMax"
)

// ratios are the figures' ratios that could be measured.
func (f fairness) ratios() map[string]float64 {
	out := map[string]float64{}
	flooded := slices.Max(f.flooded).Seconds()
	if f.floodConverged > 0 {
		out[ratioFloodConvergence] = flooded / f.floodConverged.Seconds()
	}
	if len(f.alone) > 0 && slices.Max(f.alone) > 0 {
		out[ratioAlone] = flooded / slices.Max(f.alone).Seconds()
	}
	if f.worldReconcile > 0 {
		out[ratioWorldReconcile] = flooded / f.worldReconcile.Seconds()
		out[ratioWorldMedian] = median(f.flooded).Seconds() / f.worldReconcile.Seconds()
	}
	return out
}

// readyTracker waits for one object's Ready condition for its generation.
type readyTracker struct {
	kind string
	key  types.NamespacedName
	// applied requires Ready=True (APIRules); a RateLimit may end with any
	// verdict.
	applied bool
	ok      bool
}

func (t *readyTracker) observe(e framework.Event) {
	if e.Kind != t.kind || e.Type == framework.Deleted || client.ObjectKeyFromObject(e.Object) != t.key {
		return
	}
	t.ok = readyFor(e.Object, t.applied)
}

// readyFor reports whether an APIRule's or a RateLimit's status and Ready
// condition are of its generation (and the condition True if applied).
func readyFor(obj client.Object, applied bool) bool {
	var conds []metav1.Condition
	var observed int64
	switch o := obj.(type) {
	case *gatewayv1alpha1.APIRule:
		conds, observed = o.Status.Conditions, o.Status.ObservedGeneration
	case *gatewayv1alpha1.RateLimit:
		conds, observed = o.Status.Conditions, o.Status.ObservedGeneration
	}
	c := meta.FindStatusCondition(conds, gatewayv1alpha1.ConditionReady)
	return c != nil && observed == obj.GetGeneration() && c.ObservedGeneration == obj.GetGeneration() &&
		(!applied || c.Status == metav1.ConditionTrue)
}

func (t *readyTracker) converged() bool  { return t.ok }
func (t *readyTracker) progress() string { return fmt.Sprintf("%s %s not Ready yet", t.kind, t.key) }

// measureFairness runs the noisy-neighbour phase with both controllers
// running; limiter is the ratelimit controller's process.
func (b *bench) measureFairness(ctx context.Context, limiter *controller) ([]fairness, error) {
	if b.opts.flood == 0 {
		return nil, nil
	}
	for _, ns := range []string{quietNS, noisyNS} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: benchLabels()}}); err != nil {
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	gw := gatewayName(1 % len(b.plan.gateways)) // odd: its route limits are Enforced
	var fixtures []client.Object
	quiet := make([]client.Object, 0, 2*samples)
	for i := range 2 * samples {
		svc, rule := fairAPIRule(quietNS, "quiet", i, gw, 2)
		fixtures = append(fixtures, svc)
		quiet = append(quiet, rule)
	}
	noisy := make([]client.Object, 0, b.opts.flood)
	for i := range b.opts.flood {
		rules := 2
		if i < largeAPIRules {
			rules = maxRules
		}
		svc, rule := fairAPIRule(noisyNS, "noisy", i, gw, rules)
		fixtures = append(fixtures, svc)
		noisy = append(noisy, rule)
	}
	framework.Logf("(3) noisy neighbour: %d Services", len(fixtures))
	if _, err := b.createAll(ctx, fixtures); err != nil {
		return nil, err
	}
	apiRules, err := b.apiRuleFairness(ctx, quiet, noisy)
	if err != nil {
		return nil, err
	}
	limits, err := b.rateLimitFairness(ctx, limiter, quiet, noisy)
	if err != nil {
		return nil, err
	}
	return []fairness{apiRules, limits}, nil
}

// apiRuleFairness: team-a's APIRules alone, then under team-b's flood of
// APIRules.
func (b *bench) apiRuleFairness(ctx context.Context, quiet, noisy []client.Object) (fairness, error) {
	f := fairness{kind: "APIRule"}
	var err error
	framework.Logf("(3) team-a's APIRules alone")
	if f.alone, err = b.timeReady(ctx, quiet[:samples], true); err != nil {
		return f, err
	}
	framework.Logf("(3) team-b creates %d APIRules and keeps updating them", len(noisy))
	floodStart := time.Now()
	floodDone := b.watchConverged(ctx, noisy)
	stop, err := b.flood(ctx, noisy, func(o client.Object, n int) {
		o.(*gatewayv1alpha1.APIRule).Spec.Timeout = &metav1.Duration{Duration: time.Duration(10+n%20) * time.Second}
	})
	if err != nil {
		return f, err
	}
	f.flooded, err = b.timeReady(ctx, quiet[samples:], true)
	if err == nil {
		framework.Logf("(3) waiting for team-b's APIRules to converge")
		select {
		case <-floodDone.ch:
			f.floodConverged = floodDone.at.Sub(floodStart)
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	return f, errors.Join(err, stop())
}

// rateLimitFairness: team-a's RateLimits (on its APIRules) alone, then
// under team-b's flood of RateLimits (on its own), with the ratelimit
// controller's world reconciles meanwhile.
func (b *bench) rateLimitFairness(ctx context.Context, limiter *controller, quiet, noisy []client.Object) (fairness, error) {
	f := fairness{kind: "RateLimit"}
	quietLimits := make([]client.Object, 0, len(quiet))
	for i, r := range quiet {
		quietLimits = append(quietLimits, fairRateLimit(quietNS, "quiet", i, r.GetName()))
	}
	noisyLimits := make([]client.Object, 0, len(noisy))
	for i, r := range noisy {
		noisyLimits = append(noisyLimits, fairRateLimit(noisyNS, "noisy", i, r.GetName()))
	}
	if err := b.settle(ctx, limiter); err != nil {
		return f, err
	}
	var err error
	framework.Logf("(3) team-a's RateLimits alone")
	if f.alone, err = b.timeReady(ctx, quietLimits[:samples], false); err != nil {
		return f, err
	}
	framework.Logf("(3) team-b creates %d RateLimits and keeps updating them", len(noisyLimits))
	floodStart := time.Now()
	stop, err := b.flood(ctx, noisyLimits, func(o client.Object, n int) {
		o.(*gatewayv1alpha1.RateLimit).Spec.Local.MaxTokens = int64(100 + n%50)
	})
	if err != nil {
		return f, err
	}
	before, err := limiter.Scrape(ctx)
	if err != nil {
		return f, errors.Join(err, stop())
	}
	if f.flooded, err = b.timeReady(ctx, quietLimits[samples:], false); err == nil {
		var after framework.Metrics
		if after, err = limiter.Scrape(ctx); err == nil {
			f.worldReconcile, f.worldReconciles = meanReconcile(before, after)
		}
	}
	// The flood stops, then its last updates are worked off: a few RateLimits
	// updated without pause may never show a status of their generation
	// while it goes on (the world is computed for many updates at once).
	if err = errors.Join(err, stop()); err != nil {
		return f, err
	}
	framework.Logf("(3) waiting for team-b's RateLimits to be worked off")
	if err = b.workedOff(ctx, &gatewayv1alpha1.RateLimitList{}, false); err == nil {
		f.floodConverged = time.Since(floodStart)
	}
	return f, err
}

// settle waits until the APIRule flood stopped before is worked off: every
// APIRule of team-b Ready for its last generation (the apirule controller's
// backlog written), then no world computation of the ratelimit controller
// (which computes one for APIRule changes) for a second. Team-a's
// RateLimits measured alone must not share the machine with that backlog:
// their wait alone is what their wait under the flood is compared with.
func (b *bench) settle(ctx context.Context, limiter *controller) error {
	started := time.Now()
	if err := b.workedOff(ctx, &gatewayv1alpha1.APIRuleList{}, true); err != nil {
		return err
	}
	applied := time.Since(started)
	last, scraped := uint64(0), false
	err := wait.PollUntilContextTimeout(ctx, time.Second, b.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		m, err := limiter.Scrape(ctx)
		if err != nil {
			return false, err
		}
		count, _ := m.HistogramTotals(worldTime)
		quiet := scraped && count == last
		last, scraped = count, true
		return quiet, nil
	})
	if err != nil {
		return fmt.Errorf("the ratelimit controller's world computations did not stop: %w", err)
	}
	framework.Logf("(3) team-b's flood of APIRules worked off: all Ready %s after it stopped, the ratelimit controller quiet after %s",
		applied.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	return nil
}

// workedOff waits until every object of team-b of list's kind (APIRules or
// RateLimits) is Ready for its last generation (Ready=True if applied).
func (b *bench) workedOff(ctx context.Context, list client.ObjectList, applied bool) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, b.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		if err := b.c.List(ctx, list, client.InNamespace(noisyNS)); err != nil {
			return false, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return false, err
		}
		for _, item := range items {
			if !readyFor(item.(client.Object), applied) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("team-b's %T not Ready for their last generation: %w", list, err)
	}
	return nil
}

// worldTime is the ratelimit controller's histogram of its world
// computations (the World key, which writes nothing; each namespace's
// writes are reconciles of their own).
const worldTime = "portico_ratelimit_world_seconds"

// meanReconcile is the mean duration and the number of the world
// computations between two scrapes of the ratelimit controller.
func meanReconcile(before, after framework.Metrics) (time.Duration, float64) {
	count0, sum0 := before.HistogramTotals(worldTime)
	count, sum := after.HistogramTotals(worldTime)
	if count <= count0 {
		return 0, 0
	}
	n := float64(count - count0)
	return time.Duration((sum - sum0) / n * float64(time.Second)), n
}

// timeReady creates the objects one after the other and returns, for
// each, the time from its create call until it was Ready.
func (b *bench) timeReady(ctx context.Context, objs []client.Object, applied bool) ([]time.Duration, error) {
	var out []time.Duration
	for _, obj := range objs {
		kind := kindAPIRule
		if _, ok := obj.(*gatewayv1alpha1.RateLimit); ok {
			kind = kindRateLimit
		}
		done := b.setTracker(&readyTracker{kind: kind, key: client.ObjectKeyFromObject(obj), applied: applied})
		t0 := time.Now()
		if err := b.c.Create(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			return nil, fmt.Errorf("create %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
		}
		select {
		case <-done.ch:
			out = append(out, done.at.Sub(t0))
			framework.Logf("    %s %s Ready after %s", kind, client.ObjectKeyFromObject(obj), done.at.Sub(t0).Round(time.Millisecond))
		case <-time.After(b.opts.Timeout):
			return nil, fmt.Errorf("%s %s not Ready within %s", kind, client.ObjectKeyFromObject(obj), b.opts.Timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Spread the samples over the flood.
		time.Sleep(300 * time.Millisecond)
	}
	return out, nil
}

// watchConverged completes when every APIRule of objs is Applied for its
// generation (at some moment: the flood goes on updating them).
func (b *bench) watchConverged(_ context.Context, objs []client.Object) *completion {
	done := newCompletion()
	pending := map[types.NamespacedName]bool{}
	for _, o := range objs {
		pending[client.ObjectKeyFromObject(o)] = true
	}
	b.mu.Lock()
	b.extra = func(e framework.Event) {
		key := client.ObjectKeyFromObject(e.Object)
		if !pending[key] {
			return
		}
		t := &readyTracker{kind: kindAPIRule, key: key, applied: true}
		if t.observe(e); t.ok {
			delete(pending, key)
			if len(pending) == 0 {
				done.complete(e.At)
			}
		}
	}
	b.mu.Unlock()
	return done
}

// flood creates objs with the bench's workers, then updates them (mutate
// with a counter) without pause until the returned stop is called.
func (b *bench) flood(ctx context.Context, objs []client.Object, mutate func(client.Object, int)) (func() error, error) {
	if _, err := b.createAll(ctx, objs); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	updates := 0
	for w := range min(4, len(objs)) {
		wg.Go(func() {
			for n := w; ctx.Err() == nil; n += 4 {
				obj := objs[n%len(objs)].DeepCopyObject().(client.Object)
				if err := b.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					continue
				}
				mutate(obj, n)
				if err := b.c.Update(ctx, obj); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				updates++
				mu.Unlock()
			}
		})
	}
	return func() error {
		cancel()
		wg.Wait()
		framework.Logf("    the flood made %d updates", updates)
		b.mu.Lock()
		b.extra = nil
		b.mu.Unlock()
		return errors.Join(errs...)
	}, nil
}

// fairAPIRule is the i-th APIRule of a team, with its Service.
func fairAPIRule(ns, team string, i int, gw string, rules int) (*corev1.Service, *gatewayv1alpha1.APIRule) {
	svc, rule := apiRule(i, ns, gw)
	svc.Name = fmt.Sprintf("%s-svc-%04d", team, i)
	svc.Spec.Selector = map[string]string{"app": svc.Name}
	rule.Name = fmt.Sprintf("%s-%04d", team, i)
	rule.Spec.Hosts = []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(rule.Name + "." + ns + ".bench.example.com")}
	rule.Spec.Service.Name = svc.Name
	for len(rule.Spec.Rules) < rules {
		rule.Spec.Rules = append(rule.Spec.Rules, gatewayv1alpha1.Rule{
			Path: fmt.Sprintf("/r%02d", len(rule.Spec.Rules)), Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true),
		})
	}
	return svc, rule
}

// fairRateLimit limits the i-th APIRule of a team.
func fairRateLimit(ns, team string, i int, target string) *gatewayv1alpha1.RateLimit {
	return &gatewayv1alpha1.RateLimit{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-rl-%04d", team, i), Labels: benchLabels()},
		Spec: gatewayv1alpha1.RateLimitSpec{
			TargetRef: gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: target},
			Local:     &gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}},
		},
	}
}

// gatedFlood is the smallest flood whose figures are checked against
// maxFloodShare (the short mode's few objects converge too fast for a
// share to mean anything).
const gatedFlood = 100

// fairnessNotes reports the figures and, when gate is set, checks the
// bound.
func fairnessNotes(fs []fairness, gate bool) ([]string, error) {
	var notes []string
	var errs []error
	for _, f := range fs {
		alone, flooded := slices.Max(f.alone), slices.Max(f.flooded)
		notes = append(notes, fmt.Sprintf("%ss of team-a, time to Ready: alone median %s max %s; under team-b's flood median %s max %s",
			f.kind, median(f.alone), alone.Round(time.Millisecond), median(f.flooded), flooded.Round(time.Millisecond)))
		r := f.ratios()
		if share, ok := r[ratioFloodConvergence]; ok {
			notes = append(notes, fmt.Sprintf("team-b's flood of %ss converged after %s; team-a's worst wait under it is %.0f%% of that (bound %.0f%%)",
				f.kind, f.floodConverged.Round(time.Millisecond), 100*share, 100*maxFloodShare))
			if gate && share > maxFloodShare {
				errs = append(errs, fmt.Errorf("team-a's %s waited %s under team-b's flood, %.0f%% of the flood's %s (bound %.0f%%)",
					f.kind, flooded.Round(time.Millisecond), 100*share, f.floodConverged.Round(time.Millisecond), 100*maxFloodShare))
			}
		}
		if over, ok := r[ratioAlone]; ok {
			notes = append(notes, fmt.Sprintf("team-a's worst %s wait under the flood is %.2f× its worst alone (the machine's load included; not gated)", f.kind, over))
		}
		if world, ok := r[ratioWorldReconcile]; ok {
			notes = append(notes, fmt.Sprintf("under the flood the ratelimit controller computed its world %g times, %s each on average; "+
				"team-a's worst wait is %.2f× one world computation (median %.2f×)",
				f.worldReconciles, f.worldReconcile.Round(time.Millisecond), world, r[ratioWorldMedian]))
		}
	}
	return notes, errors.Join(errs...)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
