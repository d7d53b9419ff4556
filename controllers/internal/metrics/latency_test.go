package metrics

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// newTimer returns a SpecToReady observing into a histogram of its own.
func newTimer(limit int) (*SpecToReady, prometheus.Histogram, *clock) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_seconds", Buckets: SpecToReadyBuckets})
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	return newSpecToReady(h, c.now, limit), h, c
}

// observed returns the count and sum of a histogram's observations.
func observed(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := h.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
}

func TestSpecToReady(t *testing.T) {
	const uid = types.UID("u1")
	type step func(s *SpecToReady, c *clock)
	saw := func(gen int64, ready bool) step { return func(s *SpecToReady, _ *clock) { s.Saw(uid, gen, ready) } }
	wait := func(d time.Duration) step { return func(_ *SpecToReady, c *clock) { c.advance(d) } }
	readyAt := func(gen int64) step { return func(s *SpecToReady, _ *clock) { s.Ready(uid, gen) } }
	forget := func(s *SpecToReady, _ *clock) { s.Forget(uid) }
	cases := []struct {
		name    string
		steps   []step
		count   uint64
		sum     float64
		tracked int
	}{
		{"from the first sighting to Ready", []step{saw(1, false), wait(2 * time.Second), readyAt(1)}, 1, 2, 0},
		{"later events of the same generation do not restart the clock",
			[]step{saw(1, false), wait(time.Second), saw(1, false), wait(time.Second), readyAt(1)}, 1, 2, 0},
		{"observed once per generation",
			[]step{saw(1, false), wait(time.Second), readyAt(1), wait(time.Second), readyAt(1), saw(1, true), readyAt(1)}, 1, 1, 0},
		{"each generation is timed from its own sighting",
			[]step{saw(1, false), wait(time.Second), readyAt(1), wait(time.Minute), saw(2, false), wait(3 * time.Second), readyAt(2)}, 2, 4, 0},
		{"a newer generation seen before Ready is timed from its sighting",
			[]step{saw(1, false), wait(time.Second), saw(2, false), wait(time.Second), readyAt(1), wait(time.Second), readyAt(2)}, 1, 2, 0},
		{"Ready at a newer generation than the one seen is not timed",
			[]step{saw(1, false), wait(time.Second), readyAt(2)}, 0, 0, 0},
		{"an object seen Ready is not timed", []step{saw(3, true), wait(time.Second), readyAt(3)}, 0, 0, 0},
		{"the echo of the Ready write may come before the write returns",
			[]step{saw(1, false), wait(time.Second), saw(1, true), readyAt(1)}, 1, 1, 0},
		{"an event showing a newer generation Ready drops the older sighting",
			[]step{saw(1, false), wait(time.Second), saw(2, true), readyAt(1), readyAt(2)}, 0, 0, 0},
		{"never Ready: remembered while the object exists", []step{saw(1, false), wait(time.Hour)}, 0, 0, 1},
		{"deleted: forgotten", []step{saw(1, false), forget, readyAt(1)}, 0, 0, 0},
		{"Ready without a sighting", []step{readyAt(1)}, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, h, c := newTimer(MaxSightings)
			for _, step := range tc.steps {
				step(s, c)
			}
			count, sum := observed(t, h)
			g.Expect(count).To(Equal(tc.count))
			g.Expect(sum).To(BeNumerically("~", tc.sum, 1e-9))
			g.Expect(s.Tracked()).To(Equal(tc.tracked))
		})
	}
}

// Memory is bounded: beyond the limit new objects are not timed, those
// already timed still are.
func TestSpecToReadyIsBounded(t *testing.T) {
	g := NewWithT(t)
	s, h, c := newTimer(2)
	s.Saw("a", 1, false)
	s.Saw("b", 1, false)
	s.Saw("c", 1, false)
	g.Expect(s.Tracked()).To(Equal(2))
	s.Saw("a", 2, false) // a newer generation of one already timed
	c.advance(time.Second)
	for _, uid := range []types.UID{"a", "b", "c"} {
		s.Ready(uid, 1)
	}
	s.Ready("a", 2)
	count, _ := observed(t, h)
	g.Expect(count).To(Equal(uint64(2)), "b at 1 and a at 2")
	g.Expect(s.Tracked()).To(BeZero())
}

// A nil timer does nothing (a reconciler built without its manager).
func TestSpecToReadyNil(t *testing.T) {
	var s *SpecToReady
	s.Saw("a", 1, false)
	s.Ready("a", 1)
	s.Forget("a")
	NewWithT(t).Expect(s.Tracked()).To(BeZero())
}

// The predicate records sightings from watch events, passes every event,
// and forgets deleted objects.
func TestSpecToReadyPredicate(t *testing.T) {
	g := NewWithT(t)
	s, h, c := newTimer(MaxSightings)
	ready := func(o *porticov1alpha1.APIRule) bool { return ReadyAt(o.Status.Conditions, o.Generation) }
	p := s.Predicate(func(o client.Object) bool { return ready(o.(*porticov1alpha1.APIRule)) })
	rule := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{UID: "r", Generation: 1}}
	g.Expect(p.Create(event.CreateEvent{Object: rule})).To(BeTrue())
	c.advance(time.Second)
	applied := rule.DeepCopy()
	applied.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	s.Ready("r", 1)
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: rule, ObjectNew: applied})).To(BeTrue())
	changed := applied.DeepCopy()
	changed.Generation = 2
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: applied, ObjectNew: changed})).To(BeTrue())
	g.Expect(s.Tracked()).To(Equal(1))
	g.Expect(p.Delete(event.DeleteEvent{Object: changed})).To(BeTrue())
	g.Expect(s.Tracked()).To(BeZero())
	g.Expect(p.Generic(event.GenericEvent{Object: changed})).To(BeTrue())
	count, sum := observed(t, h)
	g.Expect(count).To(Equal(uint64(1)))
	g.Expect(sum).To(Equal(1.0))
}
