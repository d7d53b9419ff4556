package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ownWrites remembers, for a while, the version of every object the
// controller wrote (an APIRule's finalizer or status, an object it created
// or updated for one), so that the watch event of exactly that version does
// not start a reconcile of the APIRule: it shows nothing the reconcile
// that wrote it did not know. Any later version (an edit or a deletion by
// someone else, a Gateway's answer in a route's status) differs in its
// resourceVersion and still starts one.
//
// A watch can report a write before its response arrives: an event of an
// object the controller is writing at that moment waits for the write's
// outcome (at most ownWriteWait) before it is judged.
type ownWrites struct {
	mu       sync.Mutex
	versions map[types.UID]ownWrite
	// writing holds, by writeKey, a channel for each write under way,
	// closed when its outcome is recorded.
	writing map[string]chan struct{}
}

type ownWrite struct {
	resourceVersion string
	at              time.Time
}

// ownWriteTTL is how long a write is remembered: far longer than a watch
// takes to report it. An event that arrives before the write is recorded
// (the watch can be faster than the response) only costs a reconcile.
const ownWriteTTL = 5 * time.Minute

// ownWritesPrune is the size from which adding prunes expired writes.
const ownWritesPrune = 1024

// ownWriteWait bounds how long an event waits for the outcome of a write
// under way of its object: the write is persisted when its event comes, so
// its response is moments away.
const ownWriteWait = time.Second

// writeKey identifies an object across its versions: its type, namespace
// and name.
func writeKey(obj client.Object) string {
	return fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// Begin and End are begin and end for the write path (owned.Observer).
func (w *ownWrites) Begin(obj client.Object) { w.begin(obj) }

// End: see Begin.
func (w *ownWrites) End(obj client.Object, written bool) { w.end(obj, written) }

// begin announces a write of obj; end, which must follow, records its
// outcome.
func (w *ownWrites) begin(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writing == nil {
		w.writing = map[string]chan struct{}{}
	}
	key := writeKey(obj)
	if _, ok := w.writing[key]; !ok {
		w.writing[key] = make(chan struct{})
	}
}

// end records the outcome of the write begin announced: obj, as written,
// or nothing when the write failed.
func (w *ownWrites) end(obj client.Object, written bool) {
	if written {
		w.add(obj)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := writeKey(obj)
	if done, ok := w.writing[key]; ok {
		close(done)
		delete(w.writing, key)
	}
}

// add records the version of obj that a write returned.
func (w *ownWrites) add(obj client.Object) {
	if obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.versions == nil {
		w.versions = map[types.UID]ownWrite{}
	}
	if len(w.versions) >= ownWritesPrune {
		for uid, v := range w.versions {
			if now.Sub(v.at) > ownWriteTTL {
				delete(w.versions, uid)
			}
		}
	}
	w.versions[obj.GetUID()] = ownWrite{resourceVersion: obj.GetResourceVersion(), at: now}
}

// take reports whether obj is the version the controller last wrote of it,
// and forgets that write once its event came.
func (w *ownWrites) take(obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if done, ok := w.writing[writeKey(obj)]; ok {
		w.mu.Unlock()
		select {
		case <-done:
		case <-time.After(ownWriteWait):
		}
		w.mu.Lock()
	}
	v, ok := w.versions[obj.GetUID()]
	if !ok || v.resourceVersion != obj.GetResourceVersion() {
		return false
	}
	delete(w.versions, obj.GetUID())
	return time.Since(v.at) <= ownWriteTTL
}

// notOwnWrite passes the APIRule's events except the update that is the
// controller's own write of its finalizer or status: what the APIRule
// holds that the reconcile reads (its spec, deletion, name, UID and
// creation time) cannot have changed in it. Every other update passes,
// also one of labels, annotations or status by someone else, so that the
// status of a hand-edited APIRule is written again.
func (w *ownWrites) notOwnWrite() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !w.take(e.ObjectNew) }}
}

// exceptOwner wraps the handler of a kind the controller writes for
// APIRules: the event of an object exactly as the controller created or
// updated it does not requeue its own APIRule (the request naming it, by
// its labels), while every other APIRule the handler maps the event to
// (sharing its host, in AccessConflict in its namespace) is queued as
// before. Deletions and others' writes requeue the owner: it writes the
// object again.
func (w *ownWrites) exceptOwner(inner handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inner.Create(ctx, e, w.filter(e.Object, q))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			inner.Update(ctx, e, w.filter(e.ObjectNew, q))
		},
		DeleteFunc: inner.Delete, GenericFunc: inner.Generic,
	}
}

// filter returns q, or, when obj is the controller's own write, a queue
// that drops the request of obj's APIRule.
func (w *ownWrites) filter(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	owner := toAPIRuleRequests(obj)
	if len(owner) == 0 || !w.take(obj) {
		return q
	}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return droppingPriorityQueue{PriorityQueue: pq, drop: owner[0]}
	}
	return droppingQueue{TypedRateLimitingInterface: q, drop: owner[0]}
}

// droppingQueue is a queue that ignores one request.
type droppingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	drop reconcile.Request
}

func (q droppingQueue) Add(item reconcile.Request) {
	if item != q.drop {
		q.TypedRateLimitingInterface.Add(item)
	}
}

func (q droppingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	if item != q.drop {
		q.TypedRateLimitingInterface.AddAfter(item, d)
	}
}

func (q droppingQueue) AddRateLimited(item reconcile.Request) {
	if item != q.drop {
		q.TypedRateLimitingInterface.AddRateLimited(item)
	}
}

// droppingPriorityQueue is a priority queue that ignores one request; the
// handlers see that it is one (they add with priorities).
type droppingPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	drop reconcile.Request
}

func (q droppingPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	kept := make([]reconcile.Request, 0, len(items))
	for _, item := range items {
		if item != q.drop {
			kept = append(kept, item)
		}
	}
	if len(kept) > 0 {
		q.PriorityQueue.AddWithOpts(o, kept...)
	}
}

func (q droppingPriorityQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q droppingPriorityQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

func (q droppingPriorityQueue) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}
