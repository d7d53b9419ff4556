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

// The scale of issue 29 (500 busy namespaces): once the bulk is draining,
// an item of a tenant that was quiet is the next one handed out, wherever
// the busy tenants are in their rounds. (Before anything was handed out,
// every tenant is equally unserved and they go in the order they became
// busy: TestOrder.)
func TestAQuietTenantIsServedNext(t *testing.T) {
	const tenants, items = 500, 20
	for _, served := range []int{1, 7, 250, 499, 500, 501, 1337, 5000, tenants*items - 1} {
		t.Run(fmt.Sprintf("after %d items of the bulk", served), func(t *testing.T) {
			g := NewWithT(t)
			q := New("", tenantOf, nil)
			defer q.ShutDown()
			for i := range items {
				for tenant := range tenants {
					q.Add(fmt.Sprintf("busy%d/%d", tenant, i))
				}
			}
			for range served {
				item, _ := q.Get()
				q.Done(item)
			}
			q.Add("quiet/1")
			item, _ := q.Get()
			g.Expect(item).To(Equal("quiet/1"))
			q.Done(item)
			q.Add("quiet/2")
			before := 0
			for item, _ = q.Get(); item != "quiet/2"; item, _ = q.Get() {
				q.Done(item)
				before++
			}
			g.Expect(before).To(BeNumerically(">", 0), "a second item right away waits for its turn")
			g.Expect(before).To(BeNumerically("<=", tenants), "and for at most one item of each busy tenant")
		})
	}
}

// A tenant that adds an item again right after each of its items is handed
// out (an attacker hammering its namespace) gets its share and no more.
func TestATenantThatRefillsGetsItsShare(t *testing.T) {
	const busy, pops = 10, 11 * 100
	for name, refill := range map[string]func(q *Queue[string], item string, n int){
		"added again while being processed": func(q *Queue[string], item string, _ int) { q.Add(item); q.Done(item) },
		"a new item once Done":              func(q *Queue[string], item string, n int) { q.Done(item); q.Add(fmt.Sprintf("evil/%d", n)) },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			q := New("", tenantOf, nil)
			defer q.ShutDown()
			for i := range pops {
				q.Add(fmt.Sprintf("busy%d/%d", i%busy, i))
			}
			q.Add("evil/0")
			evil := 0
			for n := range pops {
				item, _ := q.Get()
				if tenantOf(item) != "evil" {
					q.Done(item)
					continue
				}
				evil++
				refill(q, item, n)
			}
			g.Expect(evil).To(BeNumerically("<=", pops/(busy+1)+1))
			g.Expect(evil).To(BeNumerically(">=", pops/(busy+1)-1), "nor less: it is a tenant like the others")
		})
	}
}

// What a level remembers of idle tenants stays bounded by the tenants
// active lately, not by every tenant ever seen.
func TestIdleTenantsAreForgotten(t *testing.T) {
	g := NewWithT(t)
	q := New("", tenantOf, nil)
	defer q.ShutDown()
	for i := range 50 {
		q.Add(fmt.Sprintf("busy/%d", i))
	}
	most := 0
	for i := range 10_000 {
		q.Add(fmt.Sprintf("once%d/1", i))
		for range 2 {
			item, _ := q.Get()
			q.Done(item)
			if tenantOf(item) == "busy" {
				q.Add(item)
			}
		}
		q.mu.Lock()
		most = max(most, len(q.levels[0].tenants))
		q.mu.Unlock()
	}
	g.Expect(most).To(BeNumerically("<=", 3))
	q.ShutDown()
	drained := New("", tenantOf, nil)
	defer drained.ShutDown()
	drained.Add("a/1")
	drain(drained)
	drained.mu.Lock()
	defer drained.mu.Unlock()
	g.Expect(drained.levels).To(BeEmpty(), "an empty level is dropped with what it remembered")
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

// Get and Done with 500 tenants of 20 items each, every item added again
// once Done so the backlog stays that size.
func BenchmarkQueue(b *testing.B) {
	q := New("", tenantOf, nil)
	defer q.ShutDown()
	for tenant := range 500 {
		for i := range 20 {
			q.Add(fmt.Sprintf("t%d/%d", tenant, i))
		}
	}
	b.ResetTimer()
	for range b.N {
		item, _ := q.Get()
		q.Done(item)
		q.Add(item)
	}
}
