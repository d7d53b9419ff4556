package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// (1q) a quiet namespace during (1)'s bulk create: once the bench's
// informers have seen loneShare of (1)'s APIRules, one APIRule (with its
// Service) is created in a namespace of its own, and the bench times it
// from its create call until it is Ready for its generation. A fair queue
// serves it next, whatever the bulk's backlog; a first-in-first-out queue
// would make it wait for the rest of the bulk, most of (1)'s convergence.
const (
	// loneNS is not (3)'s quietNS: that phase creates its namespace.
	loneNS    = "bench-lone"
	loneShare = 0.2
	// maxLoneShare bounds its time to Ready, from gatedScale APIRules on,
	// as a share of (1)'s convergence time (the same run's).
	maxLoneShare = 0.2
	gatedScale   = 100
)

// loneTenant is (1q)'s APIRule and what the bench saw of it.
type loneTenant struct {
	rule *gatewayv1alpha1.APIRule
	// after is the number of (1)'s APIRules seen before it is created.
	after int
	seen  int
	ready readyTracker
	done  *completion
	// created delivers its create call's time, or the call's error.
	created chan createdAt
}

type createdAt struct {
	at  time.Time
	err error
}

// prepareLone creates the quiet namespace and the APIRule's Service.
func (b *bench) prepareLone(ctx context.Context) (*loneTenant, error) {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loneNS, Labels: benchLabels()}}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", loneNS, err)
	}
	svc, rule := fairAPIRule(loneNS, "lone", 0, gatewayName(0), rulesPerAPIRule)
	if err := b.c.Create(ctx, svc); err != nil {
		return nil, fmt.Errorf("create Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return &loneTenant{
		rule: rule, after: max(1, int(loneShare*float64(len(b.plan.apiRules)))),
		ready: readyTracker{kind: kindAPIRule, key: client.ObjectKeyFromObject(rule), applied: true},
		done:  newCompletion(), created: make(chan createdAt, 1),
	}, nil
}

// start is (1)'s start hook: it watches the bulk's creates and the lone
// APIRule (as the bench's extra observer, under its lock).
func (l *loneTenant) start(ctx context.Context, b *bench) func() {
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.extra = func(e framework.Event) {
			if _, bulk := b.plan.jwt[key(e.Object.GetNamespace(), e.Object.GetName())]; bulk && e.Kind == kindAPIRule && e.Type == framework.Added {
				if l.seen++; l.seen == l.after {
					go l.create(ctx, b.c)
				}
			}
			if l.ready.observe(e); l.ready.ok {
				l.done.complete(e.At)
			}
		}
	}
}

func (l *loneTenant) create(ctx context.Context, c client.Client) {
	framework.Logf("(1q) creating APIRule %s in the quiet namespace", l.ready.key)
	t0 := time.Now()
	err := c.Create(ctx, l.rule.DeepCopy())
	l.created <- createdAt{at: t0, err: err}
}

// wait returns the lone APIRule's time from its create call to Ready, and
// stops watching.
func (l *loneTenant) wait(ctx context.Context, b *bench) (time.Duration, error) {
	defer func() {
		b.mu.Lock()
		b.extra = nil
		b.mu.Unlock()
	}()
	var c createdAt
	select {
	case c = <-l.created:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if c.err != nil {
		return 0, fmt.Errorf("(1q) create APIRule %s: %w", l.ready.key, c.err)
	}
	select {
	case <-l.done.ch:
		return l.done.at.Sub(c.at), nil
	case <-time.After(b.opts.Timeout):
		return 0, fmt.Errorf("(1q) APIRule %s not Ready within %s", l.ready.key, b.opts.Timeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// loneShareOf is the lone APIRule's time to Ready over (1)'s convergence.
func loneShareOf(wait, converge time.Duration) float64 {
	return wait.Seconds() / max(converge.Seconds(), 1e-9)
}

// loneNote reports (1q)'s figure; err when gate is set and its share of
// (1)'s convergence time exceeds maxLoneShare.
func loneNote(wait, converge time.Duration, after int, gate bool) (string, error) {
	share := loneShareOf(wait, converge)
	note := fmt.Sprintf("(1q) an APIRule of a quiet namespace, created once %d of the bulk's APIRules were seen: Ready after %s, %.3f× (1)'s convergence (%s; bound %.2f×)",
		after, framework.FormatMilliseconds(wait), share, framework.FormatSeconds(converge), maxLoneShare)
	if gate && share > maxLoneShare {
		return note, fmt.Errorf("(1q) the quiet namespace's APIRule took %s to be Ready during the bulk, %.3f× (1)'s convergence (bound %.2f×)",
			framework.FormatMilliseconds(wait), share, maxLoneShare)
	}
	return note, nil
}
