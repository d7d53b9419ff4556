package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// scrapeTimeout bounds one gauge's reading of the cache; the cache answers
// from memory, so it is only reached if the cache is stopping.
const scrapeTimeout = 5 * time.Second

// Fill sets a gauge's series from the workers' cache: set(value, label
// values...) once per series. An error leaves the gauge without series at
// this scrape rather than with partial counts.
type Fill func(ctx context.Context, w *Workers, set func(value float64, labelValues ...string)) error

// Workers is what a Fill reads: the cache of the workers running now, and
// their scheme.
type Workers struct {
	Cache  cache.Cache
	Scheme *runtime.Scheme
	// fill replaces the gauge's Fill while these workers serve it (Track).
	fill Fill
}

// Track starts keeping a gauge's state for one workers' cache, once that
// cache has synced: it returns the Fill that reads the kept state (in
// place of the gauge's own) and what stops keeping it. An error leaves the
// gauge's own Fill in use for those workers.
type Track func(ctx context.Context, w *Workers) (Fill, func(), error)

// CacheGauge is a gauge vector computed from the workers' informer cache at
// every scrape. It exports series only while a manager it serves runs
// elected with its caches synced: the workers' manager, which the runner
// starts on the replica holding the leader Lease only. Register it once per
// process; Serve it on every workers' manager the process builds.
type CacheGauge struct {
	vec  *prometheus.GaugeVec
	fill Fill
	// track, when set, keeps the state fill would compute, from the
	// cache's events, for each workers the gauge serves.
	track Track
	// live is the workers running now, nil while none run; compared by
	// pointer, so that a manager that stops late never clears its
	// successor's.
	live atomic.Pointer[Workers]
	// mu makes concurrent scrapes take turns on vec.
	mu sync.Mutex
}

// NewCacheGauge returns a gauge whose series fill computes; vec defines the
// series (name, help, labels).
func NewCacheGauge(vec *prometheus.GaugeVec, fill Fill) *CacheGauge {
	return &CacheGauge{vec: vec, fill: fill}
}

// Describe implements prometheus.Collector.
func (g *CacheGauge) Describe(ch chan<- *prometheus.Desc) { g.vec.Describe(ch) }

// Collect implements prometheus.Collector: it recomputes the series.
func (g *CacheGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vec.Reset()
	if live := g.live.Load(); live != nil {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		fill := g.fill
		if live.fill != nil {
			fill = live.fill
		}
		if err := fill(ctx, live, func(v float64, lvs ...string) { g.vec.WithLabelValues(lvs...).Set(v) }); err != nil {
			g.vec.Reset()
		}
	}
	g.vec.Collect(ch)
}

// Serve makes the gauge read mgr's cache while mgr runs elected, from the
// moment its caches have synced (an unsynced cache would report a partial
// count) until it stops.
func (g *CacheGauge) Serve(mgr ctrl.Manager) error {
	return mgr.Add(&serving{gauge: g, mgr: mgr})
}

// serving is the runnable of one Serve. It needs leader election (the
// default for a runnable), so it runs only once mgr is elected.
type serving struct {
	gauge *CacheGauge
	mgr   ctrl.Manager
}

func (s *serving) Start(ctx context.Context) error {
	select {
	case <-s.mgr.Elected():
	case <-ctx.Done():
		return nil
	}
	if !s.mgr.GetCache().WaitForCacheSync(ctx) {
		return nil
	}
	live := &Workers{Cache: s.mgr.GetCache(), Scheme: s.mgr.GetScheme()}
	if s.gauge.track != nil {
		fill, stop, err := s.gauge.track(ctx, live)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("A gauge is computed at every scrape: its state cannot be kept from the cache's events", "error", err.Error())
		} else {
			live.fill = fill
			defer stop()
		}
	}
	s.gauge.live.Store(live)
	<-ctx.Done()
	s.gauge.live.CompareAndSwap(live, nil)
	return nil
}
