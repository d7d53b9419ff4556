package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/internal/contract"
)

// kindRateLimit is the kind label of the RateLimits' series.
const kindRateLimit = "RateLimit"

// controllerName is the controller label of the objects it writes.
var controllerName = string(contract.RateLimit.Name)

// readyReasons are the reasons of the Ready condition the controller
// writes; any other is reported as metrics.OtherReason.
var readyReasons = []string{
	gatewayv1alpha1.ReasonEnforced, gatewayv1alpha1.ReasonNotEnforced, gatewayv1alpha1.ReasonTargetNotFound,
	gatewayv1alpha1.ReasonConflicted, gatewayv1alpha1.ReasonEnvoyFilterFailed, gatewayv1alpha1.ReasonInvalid,
}

// refusal reports whether a Ready reason refuses the RateLimit: an older
// one holds its scope, or it names its target in a way the controller
// cannot act on. A missing target, no pods to limit or a failed write is
// waiting or failing, not a refusal.
func refusal(reason string) bool {
	return reason == gatewayv1alpha1.ReasonConflicted || reason == gatewayv1alpha1.ReasonInvalid
}

// rateLimits is portico_ratelimits, counted from the leader's cache at
// scrape time.
var rateLimits = metrics.NewReadyGauge(prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "portico_ratelimits",
	Help: "RateLimits by their Ready condition: ready is True, False or Unknown (also while there is none), reason is its reason.",
}, []string{"ready", "reason"}), &gatewayv1alpha1.RateLimitList{}, rateLimitConditions, readyReasons)

// worldSeconds is portico_ratelimit_world_seconds: how long computing the
// world takes, which every change waits for before its tenant's work is
// written.
var worldSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "portico_ratelimit_world_seconds",
	Help:    "Time to compute every tenant's EnvoyFilters, feed ConfigMaps and RateLimit verdicts from the whole topology (one World reconcile, which writes nothing).",
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms … 16 s
})

func init() {
	ctrlmetrics.Registry.MustRegister(rateLimits, worldSeconds)
}

func rateLimitConditions(o runtime.Object) []metav1.Condition {
	if limit, ok := o.(*gatewayv1alpha1.RateLimit); ok {
		return limit.Status.Conditions
	}
	return nil
}

// readyNow reports whether a RateLimit is Ready at its generation.
func readyNow(o client.Object) bool {
	return metrics.ReadyAt(rateLimitConditions(o), o.GetGeneration())
}

// readyReason is the reason of the RateLimit's Ready condition, or "".
func readyReason(conditions []metav1.Condition) string {
	for _, c := range conditions {
		if c.Type == gatewayv1alpha1.ConditionReady {
			return c.Reason
		}
	}
	return ""
}

// statusWritten reports a successful status write that took the RateLimit
// from before to after: a new refusal, or Ready at a new generation.
func (r *Reconciler) statusWritten(before, after *gatewayv1alpha1.RateLimit) {
	metrics.Refused(kindRateLimit, readyReason(before.Status.Conditions), readyReason(after.Status.Conditions), refusal)
	if metrics.ReadyAt(after.Status.Conditions, after.Generation) {
		r.latency.Ready(after.UID, after.Generation)
	}
}
