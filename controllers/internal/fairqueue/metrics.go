package fairqueue

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metrics are controller-runtime's workqueue metrics for one queue. Its
// collectors are registered in controller-runtime's registry when its
// package loads; the same definitions here find them there (a second
// registration of an identical collector returns the first), so the
// queue's series are the ones the default queue would report, labelled
// name=controller=<name>.
type metrics struct {
	depth             prometheus.Gauge
	adds, retries     prometheus.Counter
	latency, duration prometheus.Observer
}

// The definitions, exactly as controller-runtime registers them.
var (
	depthVec = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth",
		Help: "Current depth of workqueue by workqueue and priority",
	}, []string{"name", "controller", "priority"})
	addsVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by workqueue",
	}, []string{"name", "controller"})
	retriesVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total",
		Help: "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
	}, []string{"name", "controller"})
	latencyVec = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help:    "How long in seconds an item stays in workqueue before being requested",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name", "controller"})
	durationVec = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds",
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name", "controller"})
)

// registered returns the collector of controller-runtime's registry that
// c describes, or nil when there is none that matches.
func registered[C prometheus.Collector](c C) (C, bool) {
	err := ctrlmetrics.Registry.Register(c)
	if err == nil {
		return c, true
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, true
		}
	}
	return c, false
}

func newMetrics(name string) *metrics {
	if name == "" {
		return nil
	}
	depth, ok1 := registered(depthVec)
	adds, ok2 := registered(addsVec)
	retries, ok3 := registered(retriesVec)
	latency, ok4 := registered(latencyVec)
	duration, ok5 := registered(durationVec)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil
	}
	return &metrics{
		depth:    depth.WithLabelValues(name, name, ""),
		adds:     adds.WithLabelValues(name, name),
		retries:  retries.WithLabelValues(name, name),
		latency:  latency.WithLabelValues(name, name),
		duration: duration.WithLabelValues(name, name),
	}
}

func (m *metrics) add() {
	if m != nil {
		m.adds.Inc()
	}
}

func (m *metrics) retry() {
	if m != nil {
		m.retries.Inc()
	}
}

func (m *metrics) setDepth(n int) {
	if m != nil {
		m.depth.Set(float64(n))
	}
}

func (m *metrics) handedOut(waited time.Duration) {
	if m != nil {
		m.latency.Observe(waited.Seconds())
	}
}

func (m *metrics) worked(took time.Duration) {
	if m != nil {
		m.duration.Observe(took.Seconds())
	}
}
