package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/internal/contract"
)

// kindAPIRule is the kind label of the APIRules' series.
const kindAPIRule = "APIRule"

// controllerName is the controller label of the objects it writes.
var controllerName = string(contract.APIRule.Name)

// readyReasons are the reasons of the Ready condition the controller
// writes; any other is reported as metrics.OtherReason.
var readyReasons = []string{
	porticov1alpha1.ReasonApplied, porticov1alpha1.ReasonServiceNotFound, porticov1alpha1.ReasonGatewayNotFound,
	porticov1alpha1.ReasonInvalidRule, porticov1alpha1.ReasonApplyFailed, porticov1alpha1.ReasonConflict,
	porticov1alpha1.ReasonReferenceNotPermitted, porticov1alpha1.ReasonBackendNotPermitted, porticov1alpha1.ReasonHostOccupied,
	porticov1alpha1.ReasonHostNotPermitted, porticov1alpha1.ReasonNoDefaultGateway, porticov1alpha1.ReasonHostNotOnGateway,
	porticov1alpha1.ReasonHostReserved, porticov1alpha1.ReasonAccessConflict, porticov1alpha1.ReasonGatewayAPINotInstalled,
	porticov1alpha1.ReasonRoutePending, porticov1alpha1.ReasonRouteNotAccepted, porticov1alpha1.ReasonAuthorizerNotPermitted,
}

// refusal reports whether a Ready reason refuses the APIRule: the
// controller decided not to serve what it asks for (another's host or
// object, a right it lacks, a rule it cannot express), as opposed to
// waiting for something (a Service, a Gateway, the Gateway's answer) or
// failing to write.
func refusal(reason string) bool {
	switch reason {
	case porticov1alpha1.ReasonHostOccupied, porticov1alpha1.ReasonHostNotPermitted, porticov1alpha1.ReasonHostReserved,
		porticov1alpha1.ReasonHostNotOnGateway, porticov1alpha1.ReasonNoDefaultGateway,
		porticov1alpha1.ReasonReferenceNotPermitted, porticov1alpha1.ReasonBackendNotPermitted,
		porticov1alpha1.ReasonAccessConflict, porticov1alpha1.ReasonConflict, porticov1alpha1.ReasonInvalidRule,
		porticov1alpha1.ReasonAuthorizerNotPermitted:
		return true
	}
	return false
}

// apiRules is portico_apirules, counted from the leader's cache at scrape
// time.
var apiRules = metrics.NewReadyGauge(prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "portico_apirules",
	Help: "APIRules by their Ready condition: ready is True, False or Unknown (also while there is none), reason is its reason.",
}, []string{"ready", "reason"}), &porticov1alpha1.APIRuleList{}, conditionsOf, readyReasons)

func init() {
	ctrlmetrics.Registry.MustRegister(apiRules)
}

func conditionsOf(o runtime.Object) []metav1.Condition {
	if rule, ok := o.(*porticov1alpha1.APIRule); ok {
		return rule.Status.Conditions
	}
	return nil
}

// readyNow reports whether an APIRule is Ready at its generation.
func readyNow(o client.Object) bool {
	return metrics.ReadyAt(conditionsOf(o), o.GetGeneration())
}

// statusWritten reports a successful status write that took the APIRule
// from before to after: a new refusal, or Ready at a new generation.
func (r *Reconciler) statusWritten(before, after *porticov1alpha1.APIRule) {
	metrics.Refused(kindAPIRule, readyReason(before), readyReason(after), refusal)
	if metrics.ReadyAt(after.Status.Conditions, after.Generation) {
		r.latency.Ready(after.UID, after.Generation)
	}
}
