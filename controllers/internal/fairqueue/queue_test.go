package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// tenantOf is the tests' tenant: what comes before the "/" of an item.
func tenantOf(item string) string { t, _, _ := strings.Cut(item, "/"); return t }

// drain hands out and finishes every ready item, in order.
func drain(q *Queue[string]) []string {
	var out []string
	for q.Len() > 0 {
		item, _ := q.Get()
		out = append(out, item)
		q.Done(item)
	}
	return out
}

func TestOrder(t *testing.T) {
	low, high := ptr.To(-100), ptr.To(10)
	for _, tc := range []struct {
		name string
		adds func(q *Queue[string])
		want []string
	}{{
		name: "one tenant is first-in-first-out",
		adds: func(q *Queue[string]) { q.Add("b/1"); q.Add("b/2"); q.Add("b/3") },
		want: []string{"b/1", "b/2", "b/3"},
	}, {
		name: "a quiet tenant's item is served after one item of the busy tenant, not after its backlog",
		adds: func(q *Queue[string]) {
			for i := range 5 {
				q.Add(fmt.Sprintf("b/%d", i))
			}
			q.Add("a/new")
		},
		want: []string{"b/0", "a/new", "b/1", "b/2", "b/3", "b/4"},
	}, {
		name: "tenants take turns in the order they became busy",
		adds: func(q *Queue[string]) {
			q.Add("b/1")
			q.Add("b/2")
			q.Add("c/1")
			q.Add("c/2")
			q.Add("a/1")
		},
		want: []string{"b/1", "c/1", "a/1", "b/2", "c/2"},
	}, {
		name: "an item added twice is handed out once",
		adds: func(q *Queue[string]) { q.Add("b/1"); q.Add("a/1"); q.Add("b/1") },
		want: []string{"b/1", "a/1"},
	}, {
		name: "a higher priority comes before the turns of lower ones",
		adds: func(q *Queue[string]) {
			q.AddWithOpts(priorityqueue.AddOpts{Priority: low}, "b/1", "b/2", "a/1")
			q.AddWithOpts(priorityqueue.AddOpts{Priority: high}, "c/1")
		},
		want: []string{"c/1", "b/1", "a/1", "b/2"},
	}, {
		name: "raising a queued item's priority moves it ahead",
		adds: func(q *Queue[string]) {
			q.AddWithOpts(priorityqueue.AddOpts{Priority: low}, "b/1", "b/2")
			q.Add("b/2")
		},
		want: []string{"b/2", "b/1"},
	}, {
		name: "a lower priority does not demote a queued item",
		adds: func(q *Queue[string]) {
			q.Add("b/1")
			q.Add("b/2")
			q.AddWithOpts(priorityqueue.AddOpts{Priority: low}, "b/1")
		},
		want: []string{"b/1", "b/2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q := New("", tenantOf, nil)
			defer q.ShutDown()
			tc.adds(q)
			NewWithT(t).Expect(drain(q)).To(Equal(tc.want))
		})
	}
}

// Whatever the backlogs, an item of a tenant is handed out before more than
// one item of each other tenant that was busy when it was added.
func TestWaitIsBoundedByTheNumberOfTenants(t *testing.T) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		q := New("", tenantOf, nil)
		tenants := 1 + rng.IntN(8)
		for i := range rng.IntN(400) {
			q.Add(fmt.Sprintf("t%d/%d", rng.IntN(tenants), i))
		}
		q.Add("quiet/new")
		before := 0
		for {
			item, _ := q.Get()
			q.Done(item)
			if item == "quiet/new" {
				break
			}
			before++
		}
		g.Expect(before).To(BeNumerically("<=", tenants), "round %d: %d items before the quiet tenant's, %d tenants", round, before, tenants)
		q.ShutDown()
	}
}

func TestAnItemIsHandedOutToOneWorkerAtATime(t *testing.T) {
	g := NewWithT(t)
	q := New("", tenantOf, nil)
	defer q.ShutDown()
	q.Add("a/1")
	item, _ := q.Get()
	q.Add("a/1") // changed while being processed
	g.Expect(q.Len()).To(Equal(0), "it is not handed out again before Done")
	q.Done(item)
	g.Expect(q.Len()).To(Equal(1), "it is queued again once Done")
	again, _ := q.Get()
	g.Expect(again).To(Equal("a/1"))
	q.Done(again)
	g.Expect(q.Len()).To(Equal(0))
}

func TestDelayedItems(t *testing.T) {
	g := NewWithT(t)
	q := New("", tenantOf, nil)
	defer q.ShutDown()
	q.AddAfter("a/later", 50*time.Millisecond)
	q.Add("b/now")
	g.Expect(drain(q)).To(Equal([]string{"b/now"}))
	g.Eventually(q.Len).WithTimeout(5 * time.Second).Should(Equal(1))
	g.Expect(drain(q)).To(Equal([]string{"a/later"}))

	q.AddAfter("a/1", time.Hour)
	q.Add("a/1") // an immediate add wins over the delay
	g.Expect(drain(q)).To(Equal([]string{"a/1"}))

	q.AddRateLimited("a/2")
	g.Expect(q.NumRequeues("a/2")).To(Equal(1))
	g.Eventually(q.Len).WithTimeout(5 * time.Second).Should(Equal(1))
	q.Forget("a/2")
	g.Expect(q.NumRequeues("a/2")).To(Equal(0))
}

func TestShutDown(t *testing.T) {
	g := NewWithT(t)
	q := New("", tenantOf, nil)
	q.Add("a/1")
	item, _ := q.Get()
	done := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(done) }()
	g.Consistently(done).WithTimeout(100*time.Millisecond).ShouldNot(BeClosed(), "drain waits for the item being processed")
	q.Done(item)
	g.Eventually(done).Should(BeClosed())
	_, shutdown := q.Get()
	g.Expect(shutdown).To(BeTrue())
	g.Expect(q.ShuttingDown()).To(BeTrue())
	q.Add("a/2")
	g.Expect(q.Len()).To(Equal(0), "adds after shutdown are ignored")
}

// The queue reports controller-runtime's workqueue series under its name.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	queue := fmt.Sprintf("fairqueue-test-%d", time.Now().UnixNano())
	q := New(queue, tenantOf, nil)
	defer q.ShutDown()
	g.Expect(q.metrics).NotTo(BeNil(), "the definitions must match controller-runtime's")
	q.Add("a/1")
	q.Add("a/2")
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	value := func(name string) float64 {
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if labelOf(m, "name") == queue {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	g.Expect(value("workqueue_depth")).To(Equal(2.0))
	g.Expect(value("workqueue_adds_total")).To(Equal(2.0))
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
