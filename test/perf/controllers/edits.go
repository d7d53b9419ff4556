package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// (1e) edits at steady state: one APIRule of (1) at a time, picked at
// random (a fixed seed: the same APIRules every run), gets a new
// spec.timeout, which changes its VirtualService. Each edit is timed from
// the patch call until the bench's informers have seen both the APIRule
// Ready for its new generation and its VirtualService at a new generation.
const (
	// maxEditTail bounds the edits' 99th percentile, from gatedEdits
	// edits on, as a multiple of their median (the same run's): no edit
	// may wait for a backoff, a resync or a backlog the others did not.
	maxEditTail = 20.0
	gatedEdits  = 100
	editSeed    = 29
)

// editTracker waits for one edit: the APIRule Ready for generation (or a
// later one) and its VirtualService past vsGeneration.
type editTracker struct {
	key          types.NamespacedName
	generation   int64
	vsGeneration int64
	applied      bool
	routed       bool
}

func (t *editTracker) observe(e framework.Event) {
	if e.Type == framework.Deleted || client.ObjectKeyFromObject(e.Object) != t.key {
		return
	}
	switch e.Kind {
	case kindAPIRule:
		r := e.Object.(*gatewayv1alpha1.APIRule)
		t.applied = r.Generation >= t.generation && apiRuleReady(r)
	case kindVirtualService:
		t.routed = e.Object.GetGeneration() > t.vsGeneration
	}
}

func (t *editTracker) converged() bool { return t.applied && t.routed }

func (t *editTracker) progress() string {
	return fmt.Sprintf("edit of APIRule %s (generation %d): Applied %t, VirtualService updated %t", t.key, t.generation, t.applied, t.routed)
}

// editFigures are (1e)'s.
type editFigures struct {
	latencies []time.Duration
	// requests are the controller's API requests during the edits.
	requests float64
}

// measureEdits makes --edits edits one after the other and times each.
func (b *bench) measureEdits(ctx context.Context, p *controller) (editFigures, error) {
	var f editFigures
	if b.opts.edits == 0 {
		return f, nil
	}
	framework.Logf("(1e) %d edits of APIRules, one at a time", b.opts.edits)
	before, err := p.Scrape(ctx)
	if err != nil {
		return f, err
	}
	rng := rand.New(rand.NewPCG(editSeed, editSeed))
	for i := range b.opts.edits {
		rule := b.plan.apiRules[rng.IntN(len(b.plan.apiRules))]
		// A timeout no earlier edit set: every edit changes the spec.
		took, err := b.editOnce(ctx, client.ObjectKeyFromObject(rule), time.Duration(20+i)*time.Second)
		if err != nil {
			return f, fmt.Errorf("(1e) edit %d: %w", i+1, err)
		}
		f.latencies = append(f.latencies, took)
	}
	after, err := p.Scrape(ctx)
	if err != nil {
		return f, err
	}
	for _, v := range since(after.ByLabel("rest_client_requests_total", "method"), before.ByLabel("rest_client_requests_total", "method")) {
		f.requests += v
	}
	return f, nil
}

// editOnce sets the APIRule's timeout and waits until its edit is applied.
func (b *bench) editOnce(ctx context.Context, key types.NamespacedName, timeout time.Duration) (time.Duration, error) {
	rule := &gatewayv1alpha1.APIRule{}
	if err := b.c.Get(ctx, key, rule); err != nil {
		return 0, err
	}
	vs := metadataOnly(networkingv1.SchemeGroupVersion.WithKind(kindVirtualService))
	if err := b.c.Get(ctx, key, vs); err != nil {
		return 0, fmt.Errorf("VirtualService of APIRule %s: %w", key, err)
	}
	tr := &editTracker{key: key, generation: rule.Generation + 1, vsGeneration: vs.Generation}
	done := b.setTracker(tr)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"timeout":"%ds"}}`, int(timeout.Seconds())))
	t0 := time.Now()
	if err := b.c.Patch(ctx, rule, patch); err != nil {
		return 0, fmt.Errorf("patch APIRule %s: %w", key, err)
	}
	if rule.Generation != tr.generation {
		return 0, fmt.Errorf("APIRule %s: generation %d after the edit, want %d (someone else edits it)", key, rule.Generation, tr.generation)
	}
	select {
	case <-done.ch:
		return done.at.Sub(t0), nil
	case <-time.After(b.opts.Timeout):
		var progress string
		b.withTracker(func(tr tracker) { progress = tr.progress() })
		return 0, fmt.Errorf("not applied within %s: %s", b.opts.Timeout, progress)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// tail is the edits' 99th percentile over their median (0 without edits).
func (f editFigures) tail() float64 {
	if len(f.latencies) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(f.latencies))
	return framework.Percentile(s, 0.99).Seconds() / max(framework.Percentile(s, 0.5).Seconds(), 1e-9)
}

// note reports the edits' latencies; err when gate is set and their 99th
// percentile exceeds maxEditTail times their median.
func (f editFigures) note(gate bool) (string, error) {
	if len(f.latencies) == 0 {
		return "", nil
	}
	s := slices.Sorted(slices.Values(f.latencies))
	p50, p99, top := framework.Percentile(s, 0.5), framework.Percentile(s, 0.99), s[len(s)-1]
	note := fmt.Sprintf("(1e) %d edits at steady state, patch until Applied and VirtualService updated: p50 %s, p99 %s (%.2f× p50; bound %.0f×), max %s; %.1f API requests per edit",
		len(s), framework.FormatMilliseconds(p50), framework.FormatMilliseconds(p99), f.tail(), maxEditTail,
		framework.FormatMilliseconds(top), f.requests/float64(len(s)))
	if gate && f.tail() > maxEditTail {
		return note, fmt.Errorf("(1e) edits' p99 %s is %.1f× their median %s (bound %.0f×)",
			framework.FormatMilliseconds(p99), f.tail(), framework.FormatMilliseconds(p50), maxEditTail)
	}
	return note, nil
}
