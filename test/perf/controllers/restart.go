package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// writeMethods are the HTTP methods of requests that change something.
var writeMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// restartFigures are (1r)'s: the apirule controller restarted (SIGTERM,
// then a new process) with every APIRule of (1) in place and Applied.
type restartFigures struct {
	apiRules int
	// ready is from the new process's start to its /readyz; reconciled to
	// the first scrape with a reconcile of every APIRule.
	ready, reconciled time.Duration
	// reconciles and requests (by method) once the new process was idle.
	reconciles float64
	requests   map[string]float64
	peakRSS    float64
}

// writes are the figures' write requests by method: a restart with
// everything in place must write nothing.
func (f restartFigures) writes() map[string]float64 {
	out := map[string]float64{}
	for _, m := range writeMethods {
		if f.requests[m] > 0 {
			out[m] = f.requests[m]
		}
	}
	return out
}

// restartAPIRules stops old and starts the controller again, waits until it
// reconciled every one of the apiRules APIRules there are and stood still,
// and returns the new process (to be stopped by the caller, also with an
// error, when not nil). It adds old's 429 answers to throttled and
// startup first.
func (b *bench) restartAPIRules(ctx context.Context, old *controller, apiRules int, throttled, startup map[string]float64) (*controller, restartFigures, error) {
	f := restartFigures{apiRules: apiRules}
	n, err := tooMany(ctx, old)
	if err != nil {
		return nil, f, err
	}
	throttled[old.Name] += n
	startup[old.Name] += old.startup429
	framework.Logf("(1r) restarting %s with %d APIRules in place", old.Name, apiRules)
	if err := old.stop(); err != nil {
		return nil, f, err
	}
	t0 := time.Now()
	p, err := b.startController(ctx, contract.APIRule)
	if err != nil {
		return p, f, err
	}
	f.ready = time.Since(t0)
	apiRuleReconciles := func(m framework.Metrics) float64 {
		return m.Sum(reconcileTotal, map[string]string{"controller": string(contract.APIRule.Name)})
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, b.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		m, err := p.Scrape(ctx)
		if err != nil {
			return false, err
		}
		return apiRuleReconciles(m) >= float64(apiRules), nil
	})
	if err != nil {
		return p, f, fmt.Errorf("(1r) %s did not reconcile %d APIRules: %w (log: %s)", p.Name, apiRules, err, p.LogPath)
	}
	f.reconciled = time.Since(t0)
	m, err := p.WaitSteady(ctx, quietFor, b.opts.Timeout, apiRuleReconciles)
	if err != nil {
		return p, f, err
	}
	f.reconciles, f.requests = apiRuleReconciles(m), m.ByLabel("rest_client_requests_total", "method")
	usage, err := p.Usage()
	if err != nil {
		return p, f, err
	}
	f.peakRSS = float64(usage.PeakRSS)
	framework.Logf("(1r) %s reconciled %d APIRules %.2fs after its start; writes %v", p.Name, apiRules, f.reconciled.Seconds(), f.writes())
	return p, f, nil
}

// note reports the figures; err lists the writes (the gate: none).
func (f restartFigures) note() (string, error) {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(f.requests)) {
		parts = append(parts, fmt.Sprintf("%s %g", m, f.requests[m]))
	}
	note := fmt.Sprintf("(1r) restart with %d APIRules in place: ready after %s, every APIRule reconciled after %s, "+
		"%g reconciles once idle; API requests %s; peak RSS %.1f MiB",
		f.apiRules, framework.FormatSeconds(f.ready), framework.FormatSeconds(f.reconciled), f.reconciles,
		strings.Join(parts, ", "), framework.MiB(f.peakRSS))
	if w := f.writes(); len(w) > 0 {
		var writes []string
		for _, m := range slices.Sorted(maps.Keys(w)) {
			writes = append(writes, fmt.Sprintf("%s %g", m, w[m]))
		}
		return note, fmt.Errorf("(1r) the restarted apirule controller wrote with everything in place (want no write): %s",
			strings.Join(writes, ", "))
	}
	return note, nil
}
