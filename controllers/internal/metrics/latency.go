package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// MaxSightings bounds the generations a SpecToReady times at once (about
// 100 bytes each): far above the objects one controller serves, so it is
// only reached if something keeps objects from ever being Ready and never
// deletes them. Beyond it new generations are not timed.
const MaxSightings = 100_000

// SpecToReady times, per object, the span from the first sighting of a
// generation (the watch event that brought it) to the status write that
// makes the object Ready at that generation, and observes it once in
// portico_spec_to_ready_seconds. It remembers one generation per object
// that is not Ready yet: entries go when they are observed, when the object
// is deleted, and when a newer generation is Ready. Its methods are safe
// for concurrent use, and a nil SpecToReady does nothing.
type SpecToReady struct {
	observer prometheus.Observer
	now      func() time.Time
	limit    int

	mu   sync.Mutex
	seen map[types.UID]sighting
}

// sighting is when a generation was first seen.
type sighting struct {
	generation int64
	at         time.Time
}

// NewSpecToReady returns the timer of a kind ("APIRule", "RateLimit").
func NewSpecToReady(kind string) *SpecToReady {
	return newSpecToReady(specToReady.WithLabelValues(kind), time.Now, MaxSightings)
}

func newSpecToReady(observer prometheus.Observer, now func() time.Time, limit int) *SpecToReady {
	return &SpecToReady{observer: observer, now: now, limit: limit, seen: map[types.UID]sighting{}}
}

// Predicate records the sightings of the objects of a watch and passes
// every event; ready reports whether an object is Ready at its current
// generation. Put it first among a watch's predicates, so it sees the
// events the others drop.
func (s *SpecToReady) Predicate(ready func(client.Object) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			s.Saw(e.Object.GetUID(), e.Object.GetGeneration(), ready(e.Object))
			return true
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			s.Saw(e.ObjectNew.GetUID(), e.ObjectNew.GetGeneration(), ready(e.ObjectNew))
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			s.Forget(e.Object.GetUID())
			return true
		},
	}
}

// Saw records a sighting of an object at generation; ready says the object
// is already Ready at it (the controller's own write, or one before this
// process started), so there is nothing to time from this sighting.
func (s *SpecToReady) Saw(uid types.UID, generation int64, ready bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last, tracked := s.seen[uid]
	switch {
	case tracked && last.generation >= generation:
		// Seen before: the first sighting counts. An event showing it Ready
		// is the echo of the write that made it so, which may come before
		// the write returns: that write observes it.
	case ready:
		// Ready at a newer generation than any seen: nothing to time.
		delete(s.seen, uid)
	case tracked || len(s.seen) < s.limit:
		s.seen[uid] = sighting{generation: generation, at: s.now()}
	}
}

// Ready observes the time to Ready of an object's generation, once: call it
// when a status write that makes the object Ready at generation succeeded.
func (s *SpecToReady) Ready(uid types.UID, generation int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	last, tracked := s.seen[uid]
	if tracked && last.generation <= generation {
		delete(s.seen, uid)
	}
	s.mu.Unlock()
	// Only the generation first seen is timed: one Ready at a newer
	// generation than the sighting (the cache ran ahead of its event) would
	// be timed from a sighting of another spec.
	if tracked && last.generation == generation {
		s.observer.Observe(s.now().Sub(last.at).Seconds())
	}
}

// Forget drops what is remembered of a deleted object.
func (s *SpecToReady) Forget(uid types.UID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, uid)
}

// Tracked is how many generations are being timed.
func (s *SpecToReady) Tracked() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}
