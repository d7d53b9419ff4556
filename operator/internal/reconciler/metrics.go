package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

var allPhases = []operatorv1alpha1.ControllerPhase{
	operatorv1alpha1.PhaseDisabled, operatorv1alpha1.PhaseBlocked, operatorv1alpha1.PhaseProgressing,
	operatorv1alpha1.PhaseReady, operatorv1alpha1.PhaseDegraded,
}

// Metrics are the operator's Prometheus series. Reconcile counts, errors
// and durations come from controller-runtime
// (controller_runtime_reconcile_*); API requests from client-go
// (rest_client_requests_total).
type Metrics struct {
	// Phase is 1 for the phase each controller is in, 0 for the others.
	Phase *prometheus.GaugeVec
	// CRDAvailable is 1 when a required CRD is Established and serves the
	// version a controller needs.
	CRDAvailable *prometheus.GaugeVec
	// PreconditionsMet is 1 when every precondition of a controller holds.
	PreconditionsMet *prometheus.GaugeVec
	// Writes counts Deployment and status writes by kind of write.
	Writes *prometheus.CounterVec
	// Errors counts failed writes per controller.
	Errors *prometheus.CounterVec
	// ReadyReplicas is each controller's ready replicas, as in status.
	ReadyReplicas *prometheus.GaugeVec
	// GlobalRateLimitMode is 1 for the mode (fail-open, fail-closed) the
	// gateways' global rate limit filters run in while the rate-limit
	// service runs, 0 otherwise: the alert on the service says which.
	GlobalRateLimitMode *prometheus.GaugeVec
}

// The modes of portico_global_ratelimit_mode.
const (
	ModeFailOpen   = "fail-open"
	ModeFailClosed = "fail-closed"
)

// NewMetrics creates the series and registers them with reg when it is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_controller_phase",
			Help: "Phase of each catalog controller: 1 for the current phase, 0 otherwise.",
		}, []string{"controller", "phase"}),
		CRDAvailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_controller_crd_available",
			Help: "1 when a CRD a controller requires is Established and serves the required version.",
		}, []string{"controller", "crd"}),
		PreconditionsMet: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_controller_preconditions_met",
			Help: "1 when every precondition of a controller holds (enabled, CRDs, dependencies).",
		}, []string{"controller"}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_operator_writes_total",
			Help: "API writes sent by the reconciler, by operation.",
		}, []string{"operation"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_operator_write_errors_total",
			Help: "Failed API writes by controller and operation.",
		}, []string{"controller", "operation"}),
		ReadyReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_controller_ready_replicas",
			Help: "Ready replicas of each catalog controller's Deployment (0 without one).",
		}, []string{"controller"}),
		GlobalRateLimitMode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_global_ratelimit_mode",
			Help: "1 for the mode (fail-open, fail-closed) of the gateways' global rate limits while the rate-limit service runs, 0 otherwise.",
		}, []string{"mode"}),
	}
	// The write counters start at zero for every label value they can take,
	// so that rate() and increase() see a failure's first increment (a
	// series born at 1 has no increase) and the rules and the dashboard
	// that read them find the series before anything failed.
	for _, op := range []string{"apply", "delete", "status"} {
		m.Writes.WithLabelValues(op)
	}
	m.Errors.WithLabelValues("", "status")
	for _, c := range contract.Controllers {
		m.Errors.WithLabelValues(string(c.Name), "apply")
		m.Errors.WithLabelValues(string(c.Name), "delete")
	}
	if reg != nil {
		reg.MustRegister(m.Phase, m.CRDAvailable, m.PreconditionsMet, m.Writes, m.Errors, m.ReadyReplicas, m.GlobalRateLimitMode)
	}
	return m
}

// DefaultMetrics registers the series with controller-runtime's registry,
// served on the manager's metrics endpoint.
func DefaultMetrics() *Metrics { return NewMetrics(metrics.Registry) }

func (m *Metrics) setPhase(name operatorv1alpha1.ControllerName, phase operatorv1alpha1.ControllerPhase) {
	for _, p := range allPhases {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.Phase.WithLabelValues(string(name), string(p)).Set(v)
	}
}

// setGlobalRateLimitMode sets the mode series: running says whether the
// rate-limit service runs, failOpen how the gateways treat its absence.
func (m *Metrics) setGlobalRateLimitMode(running, failOpen bool) {
	m.GlobalRateLimitMode.WithLabelValues(ModeFailOpen).Set(boolGauge(running && failOpen))
	m.GlobalRateLimitMode.WithLabelValues(ModeFailClosed).Set(boolGauge(running && !failOpen))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
