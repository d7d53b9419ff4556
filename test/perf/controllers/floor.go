package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/golden"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

const (
	// floorController names the floor's results: the control plane alone.
	floorController = "floor"
	// floorAnnotation is what the floor patches onto every APIRule in
	// place of the controller's finalizer: the same metadata patch, with
	// nothing to remove at cleanup.
	floorAnnotation = "bench.portico.dev/floor"
)

// floorPhase is (0) or (0h): the bench itself writes what the apirule
// controller would for one mode's APIRules, with no controller running.
type floorPhase struct {
	label, mode string
	rules       []*gatewayv1alpha1.APIRule
	tracker     *apiRuleTracker
}

// floorPhases are (0) for Istio mode and (0h) for HTTPRoute mode: the
// same APIRules as (1) and (1h), in the same namespaces, next to the same
// Services, measured by the same tracker.
func (b *bench) floorPhases() []floorPhase {
	return []floorPhase{
		{label: "(0)", mode: modeIstio, rules: b.plan.apiRules, tracker: newAPIRuleTracker(b.plan.jwt, kindVirtualService)},
		{label: "(0h)", mode: modeHTTPRoute, rules: b.plan.routeRules, tracker: newAPIRuleTracker(b.plan.routeJWT, kindHTTPRoute)},
	}
}

// measureFloors runs the floor phases, before any controller runs.
func (b *bench) measureFloors(ctx context.Context) (results, error) {
	var res results
	for _, ph := range b.floorPhases() {
		r, err := b.measureFloor(ctx, ph)
		if err != nil {
			return nil, fmt.Errorf("%s floor: %w", ph.label, err)
		}
		res = append(res, r)
	}
	return res, nil
}

// measureFloor writes, for every APIRule of the phase with --workers
// writers, what the controller writes: the APIRule is created (by the
// bench, as in the controller's phase), patched once (the finalizer's
// patch), its golden objects created and its status patched to the golden
// status; in HTTPRoute mode only once the stand-in Gateway answered the
// route, as the controller writes a new route's first status. Converged is the tracker's verdict,
// as for the controller. Then it deletes all it wrote and waits until
// that is gone, so that the controller's phase starts on the same cluster.
func (b *bench) measureFloor(ctx context.Context, ph floorPhase) (result, error) {
	requests := &requestCounter{byMethod: map[string]*atomic.Int64{}}
	c, err := b.countingClient(requests)
	if err != nil {
		return result{}, err
	}
	w := &floorWriter{c: c, creator: b.c, selectors: b.selectors(), pending: map[string]*gatewayv1alpha1.APIRule{},
		answered: map[string]bool{}, final: make(chan string, len(ph.rules)), finals: map[string]gatewayv1alpha1.APIRuleStatus{}}
	framework.Logf("%s floor: the bench writes the golden objects and statuses of %d APIRules (%s mode), no controller running (%d workers)",
		ph.label, len(ph.rules), ph.mode, b.opts.workers)
	done := b.setTracker(ph.tracker)
	if ph.mode == modeHTTPRoute {
		b.gateway.reset()
		b.setExtra(w.observe)
	}
	defer b.setExtra(nil)
	cpu0 := b.cpu(nil)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	finals := b.startFinalWriters(ctx, cancel, w)
	t0 := time.Now()
	created, err := b.forEach(ctx, len(ph.rules), func(ctx context.Context, i int) error { return w.write(ctx, ph.rules[i]) })
	if err != nil {
		return result{}, err
	}
	framework.Logf("%s floor: written in %.2fs; waiting for convergence", ph.label, created.Seconds())
	if err := b.awaitFloor(ctx, done, ph); err != nil {
		return result{}, err
	}
	close(w.final)
	finals()
	if err := context.Cause(ctx); err != nil {
		return result{}, err
	}
	res := result{controller: floorController, mode: ph.mode, objects: fmt.Sprintf("%d APIRules (%s mode)", len(ph.rules), ph.mode),
		count: len(ph.rules), create: created, converge: done.at.Sub(t0), cpu: b.cpu(nil).Since(cpu0), requests: requests.counts()}
	res.notes = append(res.notes, "CPU until converged: "+res.cpu.String(), requestNote(&res))
	b.withTracker(func(tracker) { res.notes = append(res.notes, ph.tracker.timeline(t0)) })
	if ph.mode == modeHTTPRoute {
		res.notes = append(res.notes, b.gateway.figures().String())
	}
	framework.Logf("%s floor: converged after %.2fs", ph.label, res.converge.Seconds())
	return res, b.deleteFloor(ctx)
}

// awaitFloor waits for the floor's convergence, logging progress.
func (b *bench) awaitFloor(ctx context.Context, done *completion, ph floorPhase) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-done.ch:
			return nil
		case <-ticker.C:
			b.withTracker(func(tr tracker) { framework.Logf("%s floor: %s", ph.label, tr.progress()) })
		case <-ctx.Done():
			var progress string
			b.withTracker(func(tr tracker) { progress = tr.progress() })
			return fmt.Errorf("did not converge within %s: %s: %w", b.opts.Timeout, progress, context.Cause(ctx))
		}
	}
}

// startFinalWriters runs --workers writers of the final statuses of
// HTTPRoute-mode APIRules whose routes the stand-in answered; the
// returned function waits for them once w.final is closed.
func (b *bench) startFinalWriters(ctx context.Context, cancel context.CancelCauseFunc, w *floorWriter) func() {
	var wg sync.WaitGroup
	for range b.opts.workers {
		wg.Go(func() {
			for k := range w.final {
				if err := w.writeFinal(ctx, k); err != nil {
					cancel(err)
				}
			}
		})
	}
	return wg.Wait
}

// selectors are the pod selectors of the bench's Services, which the
// controller reads from its cache.
func (b *bench) selectors() map[types.NamespacedName]map[string]string {
	out := make(map[types.NamespacedName]map[string]string, len(b.plan.services))
	for _, svc := range b.plan.services {
		out[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = svc.Spec.Selector
	}
	return out
}

// setExtra makes f see every informer event too (nil: none).
func (b *bench) setExtra(f func(framework.Event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.extra = f
}

// deleteFloor deletes the floor's APIRules and golden objects, namespace by
// namespace, and waits until none is left.
func (b *bench) deleteFloor(ctx context.Context) error {
	kinds := []client.Object{&networkingv1.VirtualService{}, &gatewayapiv1.HTTPRoute{}, &securityv1.AuthorizationPolicy{}, &securityv1.RequestAuthentication{}}
	// The apirule controller's field manager and managed-by label are its
	// binary's name.
	golden := client.MatchingLabels{labelManagedBy: contract.APIRule.Binary()}
	_, err := b.forEach(ctx, len(b.plan.namespaces), func(ctx context.Context, i int) error {
		in := client.InNamespace(b.plan.namespaces[i])
		errs := []error{b.c.DeleteAllOf(ctx, &gatewayv1alpha1.APIRule{}, in, client.MatchingLabels(benchLabels())),
			// The admission policy's finalizer, which no controller takes off.
			b.releaseNamespace(ctx, b.plan.namespaces[i])}
		for _, kind := range kinds {
			errs = append(errs, b.c.DeleteAllOf(ctx, kind, in, golden))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("delete the floor's objects: %w", err)
	}
	if err := b.waitGone(ctx, "the floor's APIRules", &gatewayv1alpha1.APIRuleList{}); err != nil {
		return err
	}
	return b.waitNone(ctx, "the floor's golden objects", golden, &networkingv1.VirtualServiceList{}, &gatewayapiv1.HTTPRouteList{},
		&securityv1.AuthorizationPolicyList{}, &securityv1.RequestAuthenticationList{})
}

// floorWriter writes what the controller would.
type floorWriter struct {
	// c writes what the controller writes, as its ServiceAccount, and
	// counts its requests; creator creates the APIRules, as the bench
	// does in the controller's phase.
	c, creator client.Client
	selectors  map[types.NamespacedName]map[string]string

	mu sync.Mutex
	// pending holds HTTPRoute-mode APIRules whose objects are written,
	// answered the routes the stand-in answered, both by key;
	// final receives the keys that have both, finals their final status.
	pending  map[string]*gatewayv1alpha1.APIRule
	answered map[string]bool
	finals   map[string]gatewayv1alpha1.APIRuleStatus
	final    chan string
}

// write creates the APIRule, patches its metadata, creates its golden
// objects and patches its status to the golden one (in HTTPRoute mode
// once the route is answered).
func (w *floorWriter) write(ctx context.Context, planned *gatewayv1alpha1.APIRule) error {
	rule := planned.DeepCopy()
	if err := w.creator.Create(ctx, rule); err != nil {
		return fmt.Errorf("create APIRule %s/%s: %w", rule.Namespace, rule.Name, err)
	}
	patched := rule.DeepCopy()
	if !slices.Contains(rule.Finalizers, apiruleFinalizer) {
		// Without the admission policy the controller patches its
		// finalizer on; the floor patches the same metadata once.
		patched.SetAnnotations(map[string]string{floorAnnotation: "finalizer"})
		if err := w.c.Patch(ctx, patched, client.MergeFromWithOptions(rule, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch APIRule %s/%s: %w", rule.Namespace, rule.Name, err)
		}
	}
	writes, err := golden.For(patched, nil, w.selectors)
	if err != nil {
		return fmt.Errorf("golden writes of APIRule %s/%s: %w", rule.Namespace, rule.Name, err)
	}
	for _, obj := range writes.Objects {
		if err := w.c.Create(ctx, obj, client.FieldOwner(contract.APIRule.Binary())); err != nil {
			return fmt.Errorf("create %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if !writesRoute(writes.Objects) {
		_, err := w.patchStatus(ctx, patched, writes.Final())
		return err
	}
	// HTTPRoute mode: as the controller, one status, once the Gateway
	// answered the route.
	k := key(rule.Namespace, rule.Name)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[k], w.finals[k] = patched, writes.Final()
	if w.answered[k] {
		w.final <- k
	}
	return nil
}

// writesRoute reports whether objs hold an HTTPRoute.
func writesRoute(objs []client.Object) bool {
	for _, o := range objs {
		if _, ok := o.(*gatewayapiv1.HTTPRoute); ok {
			return true
		}
	}
	return false
}

// observe notes the stand-in's answers (informer events, under the
// bench's lock).
func (w *floorWriter) observe(e framework.Event) {
	route, ok := e.Object.(*gatewayapiv1.HTTPRoute)
	if !ok || e.Type == framework.Deleted || !answered(route, route.Spec.ParentRefs) {
		return
	}
	k := key(route.Namespace, route.Name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.answered[k] {
		return
	}
	w.answered[k] = true
	if w.pending[k] != nil {
		w.final <- k
	}
}

// writeFinal patches an answered APIRule's final status.
func (w *floorWriter) writeFinal(ctx context.Context, k string) error {
	w.mu.Lock()
	rule, status := w.pending[k], w.finals[k]
	w.mu.Unlock()
	_, err := w.patchStatus(ctx, rule, status)
	return err
}

// patchStatus patches rule's status to status as the controller does: a
// merge patch at the resourceVersion it knows.
func (w *floorWriter) patchStatus(ctx context.Context, rule *gatewayv1alpha1.APIRule, status gatewayv1alpha1.APIRuleStatus) (*gatewayv1alpha1.APIRule, error) {
	after := rule.DeepCopy()
	after.Status = status
	if err := w.c.Status().Patch(ctx, after, client.MergeFromWithOptions(rule, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("patch the status of APIRule %s/%s: %w", rule.Namespace, rule.Name, err)
	}
	return after, nil
}

// requestCounter counts a client's API requests by method.
type requestCounter struct {
	mu       sync.Mutex
	byMethod map[string]*atomic.Int64
}

func (rc *requestCounter) add(method string) {
	rc.mu.Lock()
	n := rc.byMethod[method]
	if n == nil {
		n = &atomic.Int64{}
		rc.byMethod[method] = n
	}
	rc.mu.Unlock()
	n.Add(1)
}

func (rc *requestCounter) counts() map[string]float64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]float64{}
	for m, n := range rc.byMethod {
		out[m] = float64(n.Load())
	}
	return out
}

type countingTransport struct {
	next http.RoundTripper
	rc   *requestCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.rc.add(req.Method)
	return t.next.RoundTrip(req)
}

// countingClient is a client of its own whose requests rc counts: the
// floor's requests, as rest_client_requests_total counts the controller's.
// It impersonates the apirule controller's ServiceAccount, so that the API
// server authorizes the floor's requests as the controller's.
func (b *bench) countingClient(rc *requestCounter) (client.Client, error) {
	cfg := rest.CopyConfig(b.conn.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccountUser(contract.APIRule.Binary()), Groups: serviceAccountGroups()}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, rc: rc} })
	return client.New(cfg, client.Options{Scheme: b.conn.Scheme})
}

// forEach runs f for 0..n-1 with --workers concurrent calls, until the
// first error; it returns how long that took.
func (b *bench) forEach(ctx context.Context, n int, f func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(b.opts.workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return took, nil
}

// waitNone waits until no object of the lists' kinds matches selector.
func (b *bench) waitNone(ctx context.Context, what string, selector client.ListOption, lists ...client.ObjectList) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, b.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		for _, list := range lists {
			if err := b.c.List(ctx, list, selector); err != nil {
				return false, err
			}
			if meta.LenList(list) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be deleted: %w", what, err)
	}
	return nil
}
