package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Operations of portico_objects_written_total.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
)

var (
	// written counts the objects the controllers write (not the statuses and
	// finalizers of the objects they read), by kind and operation.
	written = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portico_objects_written_total",
		Help: "Objects the controller wrote successfully (Istio and Gateway API objects, Certificates, Secrets, ConfigMaps), by kind and operation (create, update, delete).",
	}, []string{"controller", "kind", "operation"})

	// refusals counts the objects that went into a refusal reason.
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portico_refusals_total",
		Help: "Objects newly refused: their Ready condition went to a refusal reason (counted once per transition, not per reconcile).",
	}, []string{"kind", "reason"})

	// specToReady is the time from the first sighting of an object's
	// generation to the status write that made it Ready at that generation.
	specToReady = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "portico_spec_to_ready_seconds",
		Help:    "Time from when the controller first saw an object's new generation until it wrote Ready=True for that generation.",
		Buckets: SpecToReadyBuckets,
	}, []string{"kind"})
)

// SpecToReadyBuckets span 10 ms (an idle controller's reconcile) to 5
// minutes (a backlog of thousands of objects).
var SpecToReadyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func init() {
	ctrlmetrics.Registry.MustRegister(written, refusals, specToReady)
}

// Written counts one successful write of an object of kind by controller.
func Written(controller, kind, operation string) {
	written.WithLabelValues(controller, kind, operation).Inc()
}

// Refused counts a refusal when an object's Ready reason changed from
// before to after and after is a refusal. Call it once the status write
// that made the change succeeded.
func Refused(kind, before, after string, isRefusal func(reason string) bool) {
	if after != before && isRefusal(after) {
		refusals.WithLabelValues(kind, after).Inc()
	}
}
