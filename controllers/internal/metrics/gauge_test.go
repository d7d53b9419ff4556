package metrics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func TestReadyLabels(t *testing.T) {
	reasons := []string{"Applied", "HostOccupied"}
	ready := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: "Other", Status: metav1.ConditionTrue, Reason: "X"}, {Type: ConditionReady, Status: status, Reason: reason}}
	}
	cases := map[string]struct {
		conditions         []metav1.Condition
		wantReady, wantWhy string
	}{
		"no condition yet":                     {nil, "Unknown", ""},
		"no Ready condition":                   {[]metav1.Condition{{Type: "Other", Status: metav1.ConditionTrue, Reason: "X"}}, "Unknown", ""},
		"ready":                                {ready(metav1.ConditionTrue, "Applied"), "True", "Applied"},
		"refused":                              {ready(metav1.ConditionFalse, "HostOccupied"), "False", "HostOccupied"},
		"unknown":                              {ready(metav1.ConditionUnknown, "Applied"), "Unknown", "Applied"},
		"a reason the controller never writes": {ready(metav1.ConditionFalse, "Anything-a-tenant-wrote"), "False", OtherReason},
		"a status outside the enum":            {ready("Maybe", ""), "Unknown", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r, why := ReadyLabels(tc.conditions, reasons)
			g.Expect(r).To(Equal(tc.wantReady))
			g.Expect(why).To(Equal(tc.wantWhy))
		})
	}
}

func TestReadyAt(t *testing.T) {
	g := NewWithT(t)
	c := []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 2}}
	g.Expect(ReadyAt(c, 2)).To(BeTrue())
	g.Expect(ReadyAt(c, 3)).To(BeFalse(), "ready at an older generation")
	c[0].Status = metav1.ConditionFalse
	g.Expect(ReadyAt(c, 2)).To(BeFalse())
	g.Expect(ReadyAt(nil, 0)).To(BeFalse())
}

// fakeManager is what Serve uses of a manager: its runnables, election
// and cache.
type fakeManager struct {
	manager.Manager
	elected   chan struct{}
	cache     cache.Cache
	scheme    *runtime.Scheme
	runnables []manager.Runnable
}

func (m *fakeManager) Add(r manager.Runnable) error { m.runnables = append(m.runnables, r); return nil }
func (m *fakeManager) Elected() <-chan struct{}     { return m.elected }
func (m *fakeManager) GetCache() cache.Cache        { return m.cache }
func (m *fakeManager) GetScheme() *runtime.Scheme   { return m.scheme }

// fakeCache serves one kind: from an informer's store, or (store nil) from
// a client's list, as a cache of several namespaces does.
type fakeCache struct {
	cache.Cache
	store    toolscache.Store
	handlers *handlers // nil: the informer takes no handler
	list     client.Reader
}

// storeInformer is an informer that exposes its store, as client-go's do,
// and takes event handlers: each is handed the store's objects as added,
// then whatever the test sends it.
type storeInformer struct {
	cache.Informer
	store    toolscache.Store
	handlers *handlers
}

// handlers are a storeInformer's event handlers, and whether each has
// synced (been handed the store's objects).
type handlers struct {
	mu      sync.Mutex
	added   []toolscache.ResourceEventHandler
	removed int
	synced  bool
}

type registration struct {
	toolscache.ResourceEventHandlerRegistration
	h *handlers
}

func (r registration) HasSynced() bool {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.h.synced
}

func (i storeInformer) GetStore() toolscache.Store { return i.store }

func (i storeInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	if i.handlers == nil {
		return nil, fmt.Errorf("this informer takes no handler")
	}
	for _, o := range i.store.List() {
		h.OnAdd(o, true)
	}
	i.handlers.mu.Lock()
	defer i.handlers.mu.Unlock()
	i.handlers.added = append(i.handlers.added, h)
	return registration{h: i.handlers}, nil
}

func (i storeInformer) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error {
	i.handlers.mu.Lock()
	defer i.handlers.mu.Unlock()
	i.handlers.removed++
	return nil
}

// handler is the last handler added, once there is one.
func (h *handlers) handler() toolscache.ResourceEventHandler {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.added) == 0 {
		return nil
	}
	return h.added[len(h.added)-1]
}

func (c *fakeCache) GetInformerForKind(_ context.Context, gvk schema.GroupVersionKind, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if gvk.Kind != "APIRule" {
		return nil, fmt.Errorf("no informer of %s", gvk.Kind)
	}
	if c.store != nil {
		return storeInformer{store: c.store, handlers: c.handlers}, nil
	}
	return listOnlyInformer{}, nil
}

// listOnlyInformer is an informer that neither exposes a store nor takes
// handlers: the gauge reads the cache's list at every scrape.
type listOnlyInformer struct{ cache.Informer }

func (listOnlyInformer) AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return nil, fmt.Errorf("this informer takes no handler")
}

func (c *fakeCache) WaitForCacheSync(context.Context) bool { return true }

func (c *fakeCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.list.List(ctx, list, opts...)
}

func apiRule(name string, status metav1.ConditionStatus, reason string) *porticov1alpha1.APIRule {
	r := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}}
	if reason != "" {
		r.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}}
	}
	return r
}

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := porticov1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestReadyGauge() *CacheGauge {
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_apirules", Help: "APIRules by Ready condition."}, []string{"ready", "reason"})
	return NewReadyGauge(vec, &porticov1alpha1.APIRuleList{}, func(o runtime.Object) []metav1.Condition {
		if r, ok := o.(*porticov1alpha1.APIRule); ok {
			return r.Status.Conditions
		}
		return nil
	}, []string{"Applied", "HostOccupied"})
}

const readyHelp = "# HELP test_apirules APIRules by Ready condition.\n# TYPE test_apirules gauge\n"

// The gauge counts the cached objects by Ready condition, only while the
// manager it serves is elected and running, whichever way the cache holds
// them.
func TestReadyGaugeLeaderOnly(t *testing.T) {
	rules := []*porticov1alpha1.APIRule{
		apiRule("a", metav1.ConditionTrue, "Applied"), apiRule("b", metav1.ConditionTrue, "Applied"),
		apiRule("c", metav1.ConditionFalse, "HostOccupied"), apiRule("d", "", ""),
	}
	want := readyHelp + `test_apirules{ready="False",reason="HostOccupied"} 1
test_apirules{ready="True",reason="Applied"} 2
test_apirules{ready="Unknown",reason=""} 1
`
	scheme := testScheme(t)
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	builder := fake.NewClientBuilder().WithScheme(scheme)
	for _, r := range rules {
		g := NewWithT(t)
		g.Expect(store.Add(r)).To(Succeed())
		builder = builder.WithObjects(r.DeepCopy())
	}
	caches := map[string]cache.Cache{
		"counted from the informer's events":              &fakeCache{store: store, handlers: &handlers{synced: true}},
		"informer store, read at every scrape":            &fakeCache{store: store},
		"list (several namespaces), read at every scrape": &fakeCache{list: builder.Build()},
	}
	for name, c := range caches {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			gauge := newTestReadyGauge()
			mgr := &fakeManager{elected: make(chan struct{}), cache: c, scheme: scheme}
			g.Expect(gauge.Serve(mgr)).To(Succeed())
			g.Expect(mgr.runnables).To(HaveLen(1))
			_, runsOnLeaderOnly := mgr.runnables[0].(manager.LeaderElectionRunnable)
			g.Expect(runsOnLeaderOnly).To(BeFalse(), "a runnable that does not opt out needs leader election")

			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- mgr.runnables[0].Start(ctx) }()
			g.Consistently(func() int { return testutil.CollectAndCount(gauge) }, 100*time.Millisecond).Should(BeZero(),
				"not elected: no series")

			close(mgr.elected)
			g.Eventually(func() error { return testutil.CollectAndCompare(gauge, strings.NewReader(want)) }).Should(Succeed())

			stop()
			g.Expect(<-done).To(Succeed())
			g.Expect(testutil.CollectAndCount(gauge)).To(BeZero(), "stopped: no series")
		})
	}
}

// A manager that stops after its successor started leaves the successor's
// cache in use.
func TestCacheGaugeSuccessor(t *testing.T) {
	g := NewWithT(t)
	scheme := testScheme(t)
	one, two := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	g.Expect(two.Add(apiRule("a", metav1.ConditionTrue, "Applied"))).To(Succeed())
	gauge := newTestReadyGauge()
	start := func(store toolscache.Store) (context.CancelFunc, chan error) {
		elected := make(chan struct{})
		close(elected)
		mgr := &fakeManager{elected: elected, cache: &fakeCache{store: store}, scheme: scheme}
		g.Expect(gauge.Serve(mgr)).To(Succeed())
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- mgr.runnables[0].Start(ctx) }()
		return stop, done
	}
	stopOne, doneOne := start(one)
	g.Eventually(func() bool { return gauge.live.Load() != nil }).Should(BeTrue())
	stopTwo, doneTwo := start(two)
	g.Eventually(func() int { return testutil.CollectAndCount(gauge) }).Should(Equal(1))
	stopOne()
	g.Expect(<-doneOne).To(Succeed())
	g.Expect(testutil.CollectAndCount(gauge)).To(Equal(1))
	stopTwo()
	g.Expect(<-doneTwo).To(Succeed())
	g.Expect(testutil.CollectAndCount(gauge)).To(BeZero())
}

// A fill that fails exports nothing rather than a partial count.
func TestCacheGaugeFillError(t *testing.T) {
	g := NewWithT(t)
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_partial", Help: "h"}, []string{"x"})
	gauge := NewCacheGauge(vec, func(_ context.Context, _ *Workers, set func(float64, ...string)) error {
		set(1, "counted before the error")
		return context.DeadlineExceeded
	})
	gauge.live.Store(&Workers{})
	g.Expect(testutil.CollectAndCount(gauge)).To(BeZero())
}

// The counts kept from the informer's events follow every add, update and
// delete (a tombstone too), export nothing until the handler has counted
// what the informer held, and stop with the workers.
func TestReadyGaugeCountsEvents(t *testing.T) {
	g := NewWithT(t)
	scheme := testScheme(t)
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	a, b := apiRule("a", metav1.ConditionTrue, "Applied"), apiRule("b", metav1.ConditionFalse, "HostOccupied")
	g.Expect(store.Add(a)).To(Succeed())
	g.Expect(store.Add(b)).To(Succeed())
	h := &handlers{}
	gauge := newTestReadyGauge()
	elected := make(chan struct{})
	close(elected)
	mgr := &fakeManager{elected: elected, cache: &fakeCache{store: store, handlers: h}, scheme: scheme}
	g.Expect(gauge.Serve(mgr)).To(Succeed())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.runnables[0].Start(ctx) }()
	g.Eventually(h.handler).ShouldNot(BeNil())
	g.Eventually(func() bool { return gauge.live.Load() != nil }).Should(BeTrue())
	g.Expect(testutil.CollectAndCount(gauge)).To(BeZero(), "the handler has not synced: no partial count")

	h.mu.Lock()
	h.synced = true
	h.mu.Unlock()
	g.Expect(testutil.CollectAndCompare(gauge, strings.NewReader(readyHelp+`test_apirules{ready="False",reason="HostOccupied"} 1
test_apirules{ready="True",reason="Applied"} 1
`))).To(Succeed())

	handler := h.handler()
	c := apiRule("c", "", "")
	handler.OnAdd(c, false)
	fixed := apiRule("b", metav1.ConditionTrue, "Applied")
	handler.OnUpdate(b, fixed)
	handler.OnUpdate(a, a.DeepCopy()) // same series: no move
	handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/a", Obj: a})
	forged := apiRule("c", metav1.ConditionFalse, "Anything-a-tenant-wrote")
	handler.OnUpdate(c, forged)
	g.Expect(testutil.CollectAndCompare(gauge, strings.NewReader(readyHelp+`test_apirules{ready="False",reason="Other"} 1
test_apirules{ready="True",reason="Applied"} 1
`))).To(Succeed(), "a deleted, b fixed, c refused with a reason the controller never writes")
	handler.OnDelete(fixed)
	handler.OnDelete(forged)
	g.Expect(testutil.CollectAndCount(gauge)).To(BeZero(), "every object deleted: no series left at 0")

	stop()
	g.Expect(<-done).To(Succeed())
	g.Expect(h.removed).To(Equal(1), "the handler is removed when the workers stop")
	g.Expect(testutil.CollectAndCount(gauge)).To(BeZero())
}

var _ ctrl.Manager = &fakeManager{}
