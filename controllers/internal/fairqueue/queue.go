package fairqueue

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/portico-dev/portico/internal/backoff"
)

// Queue is a fair work queue; New makes one.
type Queue[T comparable] struct {
	tenantOf    func(T) string
	rateLimiter workqueue.TypedRateLimiter[T]
	metrics     *metrics
	now         func() time.Time

	mu   sync.Mutex
	cond *sync.Cond
	// items holds every item the queue knows: ready, waiting or being
	// processed.
	items map[T]*entry[T]
	// levels holds the ready items by priority; prios lists the priorities
	// of the levels, highest first.
	levels map[int]*level[T]
	prios  []int
	ready  int
	// waiting holds the items whose time has not come, earliest first.
	waiting    waitHeap[T]
	processing int
	seq        uint64
	shutdown   bool
	// wake tells the waiting loop that the earliest time changed.
	wake chan struct{}
	stop chan struct{}
}

type state int

const (
	stateReady state = iota
	stateWaiting
	stateProcessing
)

type entry[T comparable] struct {
	item     T
	tenant   string
	state    state
	priority int
	// seq identifies the entry's current place in its level: places left
	// behind by a move to another priority are skipped.
	seq uint64
	// readyAt is when a waiting item becomes ready.
	readyAt   time.Time
	heapIndex int
	// addedAt is when the item became ready (queue latency);
	// startedAt when it was handed out (work duration).
	addedAt, startedAt time.Time
	// again is set when the item was added while being processed: it is
	// queued again, with againPriority at againAt, once it is Done.
	again         bool
	againPriority int
	againAt       time.Time
}

// level is the ready items of one priority, served by start-time fair
// queueing: each tenant has a virtual start tag, the tenant with the
// smallest is served next and its tag then advances by one, and a tenant
// that becomes active starts at the level's virtual time (the tag of the
// item last served), or at its own later tag if it was served so recently
// that it still has one. A tenant that keeps its FIFO full, or refills it
// right after each item, is served once per round of tags like everyone
// else; one that was idle starts at the current round, ahead of every
// tenant already served in it.
type level[T comparable] struct {
	// tenants holds the tenants with ready items and the idle tenants whose
	// tag is still ahead of vtime; an idle tenant is forgotten once vtime
	// reaches its tag (it would start there anyway), so the map never grows
	// with the number of tenants ever seen.
	tenants map[string]*tenant[T]
	active  activeHeap[T]
	idle    idleHeap[T]
	vtime   uint64
	// served counts the items handed out at this level.
	served uint64
}

// tenant is one tenant's FIFO and place at a level.
type tenant[T comparable] struct {
	name string
	fifo []place[T]
	tag  uint64
	// Ties between equal tags: a tenant that became active at this tag
	// (fresh) goes before one that reached it by being served; fresh
	// tenants that became active after more items were served go first
	// (the one that just arrived has waited for none of this round), then
	// in the order they became active (seq); served tenants go in the
	// order they were served (since).
	fresh       bool
	since, seq  uint64
	activeIndex int
	idleIndex   int
}

// before orders two tenants of a level: the next one to serve first.
func (a *tenant[T]) before(b *tenant[T]) bool {
	switch {
	case a.tag != b.tag:
		return a.tag < b.tag
	case a.fresh != b.fresh:
		return a.fresh
	case a.fresh && a.since != b.since:
		return a.since > b.since
	case a.fresh:
		return a.seq < b.seq
	}
	return a.since < b.since
}

func newLevel[T comparable]() *level[T] {
	return &level[T]{tenants: map[string]*tenant[T]{}}
}

// enqueue appends a place to its tenant's FIFO, activating the tenant.
func (l *level[T]) enqueue(name string, p place[T]) {
	t := l.tenants[name]
	switch {
	case t == nil:
		t = &tenant[T]{name: name, tag: l.vtime, fresh: true, since: l.served, seq: p.seq, idleIndex: -1}
		l.tenants[name] = t
		heap.Push(&l.active, t)
	case t.activeIndex < 0: // remembered: its tag is still ahead of vtime
		heap.Remove(&l.idle, t.idleIndex)
		heap.Push(&l.active, t)
	}
	t.fifo = append(t.fifo, p)
}

// next takes the next tenant's oldest place that valid accepts, and
// charges the tenant for it; ok is false when the level has none.
func (l *level[T]) next(valid func(place[T]) bool) (p place[T], ok bool) {
	for l.active.Len() > 0 {
		t := l.active[0]
		for len(t.fifo) > 0 && !ok {
			p, ok = t.fifo[0], valid(t.fifo[0])
			t.fifo[0] = place[T]{}
			t.fifo = t.fifo[1:]
		}
		if ok {
			l.served++
			l.vtime = t.tag
			t.tag++
			t.fresh, t.since = false, l.served
			l.forget()
		}
		if len(t.fifo) > 0 {
			heap.Fix(&l.active, 0)
		} else {
			heap.Pop(&l.active)
			t.fifo = nil
			l.rest(t)
		}
		if ok {
			return p, true
		}
	}
	return p, false
}

// rest remembers an idle tenant while its tag is ahead of vtime.
func (l *level[T]) rest(t *tenant[T]) {
	if t.tag > l.vtime {
		heap.Push(&l.idle, t)
		return
	}
	delete(l.tenants, t.name)
}

// forget drops the idle tenants vtime has caught up with.
func (l *level[T]) forget() {
	for l.idle.Len() > 0 && l.idle[0].tag <= l.vtime {
		delete(l.tenants, heap.Pop(&l.idle).(*tenant[T]).name)
	}
}

// place is an item's place in its tenant's FIFO; seq tells a current place
// from one its item left.
type place[T comparable] struct {
	item T
	seq  uint64
}

var _ priorityqueue.PriorityQueue[string] = &Queue[string]{}

// New returns a fair queue: tenantOf names the tenant of an item, whose
// items share one turn; rateLimiter decides the delays of AddRateLimited
// (nil: Portico's, backoff.Limiter: per-item exponential from 5 ms, capped
// at 10 s). name labels the workqueue metrics ("" for none).
func New[T comparable](name string, tenantOf func(T) string, rateLimiter workqueue.TypedRateLimiter[T]) *Queue[T] {
	if rateLimiter == nil {
		rateLimiter = backoff.Limiter[T]()
	}
	q := &Queue[T]{
		tenantOf:    tenantOf,
		rateLimiter: rateLimiter,
		metrics:     newMetrics(name),
		now:         time.Now,
		items:       map[T]*entry[T]{},
		levels:      map[int]*level[T]{},
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
	}
	q.cond = sync.NewCond(&q.mu)
	go q.waitLoop()
	return q
}

// Add makes an item ready at priority 0.
func (q *Queue[T]) Add(item T) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

// AddAfter makes an item ready after a delay.
func (q *Queue[T]) AddAfter(item T, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

// AddRateLimited makes an item ready after its rate limiter's delay.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

// Forget ends the rate limiter's tracking of an item.
func (q *Queue[T]) Forget(item T) { q.rateLimiter.Forget(item) }

// NumRequeues is how often the rate limiter delayed an item.
func (q *Queue[T]) NumRequeues(item T) int { return q.rateLimiter.NumRequeues(item) }

// AddWithOpts adds items: an item already known keeps one entry, with the
// highest of its priorities and the earliest of its ready times.
func (q *Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	prio := ptr.Deref(o.Priority, 0)
	now := q.now()
	for _, item := range items {
		after := o.After
		if o.RateLimited {
			if d := q.rateLimiter.When(item); after == 0 || d < after {
				after = d
			}
		}
		if after > 0 {
			q.metrics.retry()
		}
		q.metrics.add()
		readyAt := now.Add(after)
		e, known := q.items[item]
		switch {
		case !known:
			e = &entry[T]{item: item, tenant: q.tenantOf(item), priority: prio}
			q.items[item] = e
			q.place(e, readyAt, now)
		case e.state == stateProcessing:
			if !e.again {
				e.again, e.againPriority, e.againAt = true, prio, readyAt
				continue
			}
			e.againPriority = max(e.againPriority, prio)
			if readyAt.Before(e.againAt) {
				e.againAt = readyAt
			}
		case e.state == stateReady:
			if prio > e.priority {
				q.ready--
				e.priority = prio
				q.push(e, now)
			}
		case e.state == stateWaiting:
			e.priority = max(e.priority, prio)
			if readyAt.Before(e.readyAt) {
				heap.Remove(&q.waiting, e.heapIndex)
				q.place(e, readyAt, now)
			}
		}
	}
}

// place makes e ready, or waiting until readyAt.
func (q *Queue[T]) place(e *entry[T], readyAt, now time.Time) {
	if !readyAt.After(now) {
		q.push(e, now)
		return
	}
	e.state, e.readyAt = stateWaiting, readyAt
	heap.Push(&q.waiting, e)
	if q.waiting[0] == e {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// push appends a ready entry to its tenant's FIFO at its priority.
func (q *Queue[T]) push(e *entry[T], now time.Time) {
	l := q.levels[e.priority]
	if l == nil {
		l = newLevel[T]()
		q.levels[e.priority] = l
		q.prios = append(q.prios, e.priority)
		slices.SortFunc(q.prios, func(a, b int) int { return b - a })
	}
	q.seq++
	if e.state != stateReady || e.addedAt.IsZero() {
		e.addedAt = now
	}
	e.state, e.seq = stateReady, q.seq
	l.enqueue(e.tenant, place[T]{item: e.item, seq: e.seq})
	q.ready++
	q.metrics.setDepth(q.ready)
	q.cond.Signal()
}

// pop takes the next ready item: the highest priority first, and within
// it the oldest item of the tenant with the smallest tag. Places left
// behind by a move to another priority are skipped; a level with no
// ready item left is dropped with what it remembered.
func (q *Queue[T]) pop() (*entry[T], bool) {
	for len(q.prios) > 0 {
		prio := q.prios[0]
		l := q.levels[prio]
		var found *entry[T]
		_, ok := l.next(func(p place[T]) bool {
			e, ok := q.items[p.item]
			if ok && e.state == stateReady && e.seq == p.seq && e.priority == prio {
				found = e
				return true
			}
			return false
		})
		if !ok || l.active.Len() == 0 {
			delete(q.levels, prio)
			q.prios = q.prios[1:]
		}
		if ok {
			return found, true
		}
	}
	return nil, false
}

// Get waits for the next ready item and hands it out until Done.
func (q *Queue[T]) Get() (T, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority is Get that also returns the item's priority.
func (q *Queue[T]) GetWithPriority() (T, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.shutdown {
			var zero T
			return zero, 0, true
		}
		if e, ok := q.pop(); ok {
			now := q.now()
			q.ready--
			q.processing++
			q.metrics.setDepth(q.ready)
			q.metrics.handedOut(now.Sub(e.addedAt))
			e.state, e.startedAt, e.addedAt = stateProcessing, now, time.Time{}
			return e.item, e.priority, false
		}
		q.cond.Wait()
	}
}

// Done ends the processing of an item; one added meanwhile is queued again.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.items[item]
	if !ok || e.state != stateProcessing {
		return
	}
	q.processing--
	now := q.now()
	q.metrics.worked(now.Sub(e.startedAt))
	if e.again && !q.shutdown {
		e.again, e.priority = false, e.againPriority
		q.place(e, e.againAt, now)
	} else {
		delete(q.items, item)
	}
	q.cond.Broadcast()
}

// Len is the number of ready items.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}

// ShutDown makes Get return at once with shutdown set; adds are ignored.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shutdown {
		q.shutdown = true
		close(q.stop)
	}
	q.cond.Broadcast()
}

// ShutDownWithDrain shuts down and waits until every handed-out item is
// Done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.ShutDown()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.processing > 0 {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

// waitLoop makes waiting items ready when their time comes.
func (q *Queue[T]) waitLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		now := q.now()
		for len(q.waiting) > 0 && !q.waiting[0].readyAt.After(now) {
			e := heap.Pop(&q.waiting).(*entry[T])
			q.push(e, now)
		}
		next := time.Hour
		if len(q.waiting) > 0 {
			next = q.waiting[0].readyAt.Sub(now)
		}
		q.mu.Unlock()
		timer.Reset(next)
		select {
		case <-q.stop:
			return
		case <-q.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// waitHeap orders waiting entries by ready time.
type waitHeap[T comparable] []*entry[T]

func (h waitHeap[T]) Len() int           { return len(h) }
func (h waitHeap[T]) Less(i, j int) bool { return h[i].readyAt.Before(h[j].readyAt) }
func (h waitHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *waitHeap[T]) Push(x any) {
	e := x.(*entry[T])
	e.heapIndex = len(*h)
	*h = append(*h, e)
}
func (h *waitHeap[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// activeHeap orders a level's tenants with ready items, next first.
type activeHeap[T comparable] []*tenant[T]

func (h activeHeap[T]) Len() int           { return len(h) }
func (h activeHeap[T]) Less(i, j int) bool { return h[i].before(h[j]) }
func (h activeHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].activeIndex, h[j].activeIndex = i, j
}
func (h *activeHeap[T]) Push(x any) {
	t := x.(*tenant[T])
	t.activeIndex = len(*h)
	*h = append(*h, t)
}
func (h *activeHeap[T]) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.activeIndex = -1
	return t
}

// idleHeap orders a level's remembered idle tenants by tag, to forget.
type idleHeap[T comparable] []*tenant[T]

func (h idleHeap[T]) Len() int           { return len(h) }
func (h idleHeap[T]) Less(i, j int) bool { return h[i].tag < h[j].tag }
func (h idleHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idleIndex, h[j].idleIndex = i, j
}
func (h *idleHeap[T]) Push(x any) {
	t := x.(*tenant[T])
	t.idleIndex = len(*h)
	*h = append(*h, t)
}
func (h *idleHeap[T]) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idleIndex = -1
	return t
}
