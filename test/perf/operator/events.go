package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// waiter receives the first event that matches.
type waiter struct {
	match func(framework.Event) bool
	ch    chan framework.Event
}

// hub hands informer events to the waiters registered for them.
type hub struct {
	mu      sync.Mutex
	waiters map[*waiter]struct{}
}

func newHub() *hub { return &hub{waiters: map[*waiter]struct{}{}} }

func (h *hub) publish(e framework.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waiters {
		if w.match(e) {
			w.ch <- e // buffered, and the waiter leaves the set now
			delete(h.waiters, w)
		}
	}
}

// expect registers a waiter; register it before the action it waits for.
func (h *hub) expect(match func(framework.Event) bool) *waiter {
	w := &waiter{match: match, ch: make(chan framework.Event, 1)}
	h.mu.Lock()
	h.waiters[w] = struct{}{}
	h.mu.Unlock()
	return w
}

func (h *hub) cancel(ws ...*waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range ws {
		delete(h.waiters, w)
	}
}

// await returns the waiter's event, or an error on timeout, cancellation or
// when the operator exits.
func (b *bench) await(ctx context.Context, w *waiter, timeout time.Duration, what string) (framework.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var exited <-chan struct{}
	if b.op != nil {
		exited = b.op.Done()
	}
	select {
	case e := <-w.ch:
		return e, nil
	case <-exited:
		b.hub.cancel(w)
		return framework.Event{}, fmt.Errorf("operator exited while waiting for %s: %v (log: %s)", what, b.op.Err(), b.op.LogPath)
	case <-ctx.Done():
		b.hub.cancel(w)
		return framework.Event{}, fmt.Errorf("waiting %s for %s: %w", timeout, what, ctx.Err())
	}
}

// waitUntil re-evaluates cond on the bench's caches after every informer
// event until it holds. cond may explain why it does not hold yet; the
// explanation ends up in the timeout error.
func (b *bench) waitUntil(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		w := b.hub.expect(func(framework.Event) bool { return true })
		ok, why, err := cond(ctx)
		if err != nil || ok {
			b.hub.cancel(w)
			return err
		}
		if _, err := b.await(ctx, w, max(time.Until(deadline), 0), what); err != nil {
			if why != "" {
				err = fmt.Errorf("%w (%s)", err, why)
			}
			return err
		}
	}
}

func isDeployment(name string, types ...framework.EventType) func(framework.Event) bool {
	return func(e framework.Event) bool {
		_, ok := e.Object.(*appsv1.Deployment)
		return ok && e.Object.GetName() == name && slices.Contains(types, e.Type)
	}
}

func isCRD(name string, types ...framework.EventType) func(framework.Event) bool {
	return func(e framework.Event) bool {
		_, ok := e.Object.(*apiextensionsv1.CustomResourceDefinition)
		return ok && e.Object.GetName() == name && slices.Contains(types, e.Type)
	}
}
