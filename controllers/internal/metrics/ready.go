package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ConditionReady is the condition the Ready gauges count by.
const ConditionReady = "Ready"

// OtherReason is the reason label of a Ready condition whose reason the
// controller never writes: only another writer of the status can put one
// there, and the label's values stay the controller's few.
const OtherReason = "Other"

// ReadyLabels are the label values of an object in a Ready gauge: the
// status of its Ready condition ("Unknown" without one) and its reason (""
// without one, OtherReason when it is not among reasons).
func ReadyLabels(conditions []metav1.Condition, reasons []string) (ready, reason string) {
	c := meta.FindStatusCondition(conditions, ConditionReady)
	if c == nil {
		return string(metav1.ConditionUnknown), ""
	}
	switch c.Status {
	case metav1.ConditionTrue, metav1.ConditionFalse:
		ready = string(c.Status)
	default:
		ready = string(metav1.ConditionUnknown)
	}
	reason = c.Reason
	if reason != "" && !slices.Contains(reasons, reason) {
		reason = OtherReason
	}
	return ready, reason
}

// NewReadyGauge returns the gauge of a kind's objects by Ready condition:
// vec has the labels ready and reason, list is an empty list of the kind,
// conditions returns the conditions of an object of the kind (nil for
// anything else), and reasons are those the controller writes. The kind
// must be one the workers already watch: its informer is read, never
// started.
//
// The counts are kept from the informer's events (an add, an update, a
// delete moves one object between two counts), so a scrape costs one
// series per count, not a pass over every cached object (issue 45: at
// 10,000 APIRules each scrape read them all). An informer that takes no
// event handler is read whole at every scrape instead.
func NewReadyGauge(vec *prometheus.GaugeVec, list client.ObjectList, conditions func(runtime.Object) []metav1.Condition, reasons []string) *CacheGauge {
	labels := func(o runtime.Object) readyKey {
		ready, reason := ReadyLabels(conditions(o), reasons)
		return readyKey{ready, reason}
	}
	gauge := NewCacheGauge(vec, func(ctx context.Context, w *Workers, set func(float64, ...string)) error {
		counts := readyCounts{}
		err := eachCached(ctx, w, list, func(o runtime.Object) { counts[labels(o)]++ })
		if err != nil {
			return err
		}
		counts.set(set)
		return nil
	})
	gauge.track = func(ctx context.Context, w *Workers) (Fill, func(), error) {
		informer, err := informerOf(ctx, w, list)
		if err != nil {
			return nil, nil, err
		}
		counter := &readyCounter{labels: labels, counts: readyCounts{}}
		reg, err := informer.AddEventHandler(counter)
		if err != nil {
			return nil, nil, err
		}
		fill := func(_ context.Context, _ *Workers, set func(float64, ...string)) error {
			if !reg.HasSynced() {
				return errNotCounted
			}
			counter.mu.Lock()
			defer counter.mu.Unlock()
			counter.counts.set(set)
			return nil
		}
		return fill, func() { _ = informer.RemoveEventHandler(reg) }, nil
	}
	return gauge
}

// errNotCounted is a Ready gauge's fill before its handler has counted
// every object the informer had: no series rather than a partial count.
var errNotCounted = errors.New("the cached objects are still being counted")

// readyKey is a Ready gauge's series.
type readyKey struct{ ready, reason string }

// readyCounts are the objects of each series.
type readyCounts map[readyKey]int

func (c readyCounts) set(set func(float64, ...string)) {
	for k, n := range c {
		set(float64(n), k.ready, k.reason)
	}
}

// readyCounter keeps a Ready gauge's counts from an informer's events. The
// informer hands a handler every change of its store in order, the object
// before and after an update included, so the counts need no copy of
// the objects: an update moves one object from its old series to its new.
type readyCounter struct {
	labels func(runtime.Object) readyKey
	mu     sync.Mutex
	counts readyCounts
}

func (c *readyCounter) move(from, to *readyKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if from != nil {
		if c.counts[*from]--; c.counts[*from] <= 0 {
			delete(c.counts, *from)
		}
	}
	if to != nil {
		c.counts[*to]++
	}
}

// OnAdd implements toolscache.ResourceEventHandler.
func (c *readyCounter) OnAdd(obj any, _ bool) {
	if o, ok := obj.(runtime.Object); ok {
		to := c.labels(o)
		c.move(nil, &to)
	}
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (c *readyCounter) OnUpdate(oldObj, newObj any) {
	before, ok1 := oldObj.(runtime.Object)
	after, ok2 := newObj.(runtime.Object)
	if !ok1 || !ok2 {
		return
	}
	from, to := c.labels(before), c.labels(after)
	if from != to {
		c.move(&from, &to)
	}
}

// OnDelete implements toolscache.ResourceEventHandler. A deletion the
// informer missed comes as a tombstone holding the object as last stored,
// which is what was counted.
func (c *readyCounter) OnDelete(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if o, ok := obj.(runtime.Object); ok {
		from := c.labels(o)
		c.move(&from, nil)
	}
}

// informerOf is the workers' informer of list's kind.
func informerOf(ctx context.Context, w *Workers, list client.ObjectList) (cache.Informer, error) {
	gvk, err := apiutil.GVKForObject(list, w.Scheme)
	if err != nil {
		return nil, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	informer, err := w.Cache.GetInformerForKind(ctx, gvk, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("informer of %s: %w", gvk.Kind, err)
	}
	return informer, nil
}

// eachCached calls fn with every object of list's kind in the cache,
// shared with it (read-only): from the informer's store when it is
// reachable, which costs one slice of pointers, else (a cache of several
// namespaces) from a list without deep copies.
func eachCached(ctx context.Context, w *Workers, list client.ObjectList, fn func(runtime.Object)) error {
	informer, err := informerOf(ctx, w, list)
	if err != nil {
		return err
	}
	if s, ok := informer.(interface{ GetStore() toolscache.Store }); ok {
		for _, o := range s.GetStore().List() {
			if obj, ok := o.(runtime.Object); ok {
				fn(obj)
			}
		}
		return nil
	}
	out := list.DeepCopyObject().(client.ObjectList)
	if err := w.Cache.List(ctx, out, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list %T: %w", list, err)
	}
	return meta.EachListItem(out, func(o runtime.Object) error {
		fn(o)
		return nil
	})
}

// ReadyAt reports whether conditions say Ready=True for generation.
func ReadyAt(conditions []metav1.Condition, generation int64) bool {
	c := meta.FindStatusCondition(conditions, ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}
