package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	"github.com/portico-dev/portico/internal/contract"
)

// Conditions are the RateLimit's Ready, Accepted and Enforced conditions
// for its verdict and the error of writing its EnvoyFilters (nil when they
// were written). Accepted and Enforced follow the Gateway API's policy
// conventions (GEP-713) about the RateLimit's one target; Ready carries the
// reason that matters most, as it always has.
func Conditions(v topology.Verdict, writeErr error, generation int64) []metav1.Condition {
	reason, msg := v.Reason, v.Message
	if v.Enforced() && writeErr != nil {
		reason, msg = gatewayv1alpha1.ReasonEnvoyFilterFailed, contract.Truncate(writeErr.Error(), contract.MessageMaxLength)
	}
	condition := func(conditionType string, ok bool, reason, msg string) metav1.Condition {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		return metav1.Condition{Type: conditionType, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation}
	}
	enforced := reason == gatewayv1alpha1.ReasonEnforced
	accepted := condition(gatewayv1alpha1.ConditionAccepted, true, gatewayv1alpha1.ReasonAccepted, "the target accepts the limit")
	enforcedReason := reason
	if !v.Accepted() {
		accepted = condition(gatewayv1alpha1.ConditionAccepted, false, reason, msg)
		// Not accepted, so in force nowhere; the message says why.
		enforcedReason = gatewayv1alpha1.ReasonNotEnforced
	}
	return []metav1.Condition{
		condition(gatewayv1alpha1.ConditionReady, enforced, reason, msg),
		accepted,
		condition(gatewayv1alpha1.ConditionEnforced, enforced, enforcedReason, msg),
	}
}
