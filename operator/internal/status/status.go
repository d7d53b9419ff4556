package status

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// Controller is one controller's outcome of a reconcile.
type Controller struct {
	operatorv1alpha1.ControllerStatus
	// Enabled is the spec's enabled flag; Blocked only warns when enabled.
	Enabled bool
}

// Input is everything the status is computed from.
type Input struct {
	Generation  int64
	Deleting    bool
	Controllers []Controller
	Previous    operatorv1alpha1.APIGatewayStatus
	Now         metav1.Time
}

// Compute returns the new status. It never mutates Input.Previous.
func Compute(in Input) operatorv1alpha1.APIGatewayStatus {
	out := operatorv1alpha1.APIGatewayStatus{
		ObservedGeneration: in.Generation,
		Conditions:         append([]metav1.Condition(nil), in.Previous.Conditions...),
	}
	controllers := BoundMessages(in.Controllers)
	for _, c := range controllers {
		out.Controllers = append(out.Controllers, SetTransitionTime(in.Previous.Controllers, c.ControllerStatus, in.Now))
	}
	sort.Slice(out.Controllers, func(i, j int) bool { return out.Controllers[i].Name < out.Controllers[j].Name })

	out.State = State(controllers, in.Deleting)
	out.Ready = ReadySummary(controllers)
	SetReadyCondition(&out.Conditions, out.State, controllers, in.Generation, in.Now)
	return out
}

// BoundMessages returns the controllers with messages the API accepts: an
// API server error can be longer than status.controllers[].message allows,
// and a status write it made fail would fail on every reconcile.
func BoundMessages(controllers []Controller) []Controller {
	out := make([]Controller, len(controllers))
	for i, c := range controllers {
		c.Message = contract.Truncate(c.Message, contract.ControllerStatusMaxLength)
		out[i] = c
	}
	return out
}

// SetTransitionTime keeps the previous lastTransitionTime of a controller
// whose phase did not change, and stamps now otherwise.
func SetTransitionTime(previous []operatorv1alpha1.ControllerStatus, c operatorv1alpha1.ControllerStatus, now metav1.Time) operatorv1alpha1.ControllerStatus {
	c.LastTransitionTime = now
	for _, p := range previous {
		if p.Name == c.Name && p.Phase == c.Phase && !p.LastTransitionTime.IsZero() {
			c.LastTransitionTime = p.LastTransitionTime
		}
	}
	return c
}

// State aggregates the controllers' phases, most severe first: Deleting,
// then Error (a Degraded controller or a failed apply), Processing,
// Warning (an enabled controller Blocked), Ready.
func State(controllers []Controller, deleting bool) operatorv1alpha1.State {
	if deleting {
		return operatorv1alpha1.StateDeleting
	}
	has := func(phase operatorv1alpha1.ControllerPhase, enabledOnly bool) bool {
		for _, c := range controllers {
			if c.Phase == phase && (c.Enabled || !enabledOnly) {
				return true
			}
		}
		return false
	}
	switch {
	case has(operatorv1alpha1.PhaseDegraded, false):
		return operatorv1alpha1.StateError
	case has(operatorv1alpha1.PhaseProgressing, false):
		return operatorv1alpha1.StateProcessing
	case has(operatorv1alpha1.PhaseBlocked, true):
		return operatorv1alpha1.StateWarning
	default:
		return operatorv1alpha1.StateReady
	}
}

// ReadySummary counts Ready controllers over enabled ones, as "1/2".
func ReadySummary(controllers []Controller) string {
	enabled := enabledOnly(controllers)
	ready := 0
	for _, c := range enabled {
		if c.Phase == operatorv1alpha1.PhaseReady {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(enabled))
}

// enabledOnly returns the controllers the spec enables, in order.
func enabledOnly(controllers []Controller) []Controller {
	var out []Controller
	for _, c := range controllers {
		if c.Enabled {
			out = append(out, c)
		}
	}
	return out
}

// SetReadyCondition sets the Ready condition for the given state; the
// message names every enabled controller that is not Ready and why.
func SetReadyCondition(conditions *[]metav1.Condition, state operatorv1alpha1.State, controllers []Controller, generation int64, now metav1.Time) {
	cond := metav1.Condition{
		Type:               operatorv1alpha1.ConditionReady,
		Status:             metav1.ConditionFalse,
		ObservedGeneration: generation,
		LastTransitionTime: now,
	}
	var notReady []string
	enabled := enabledOnly(controllers)
	applyFailed := false
	for _, c := range enabled {
		if c.Reason == operatorv1alpha1.ReasonDeploymentApplyFailed {
			applyFailed = true
		}
		if c.Phase != operatorv1alpha1.PhaseReady {
			notReady = append(notReady, fmt.Sprintf("%s is %s: %s", c.Name, c.Phase, c.Message))
		}
	}
	switch state {
	case operatorv1alpha1.StateDeleting:
		cond.Reason, cond.Message = operatorv1alpha1.ReasonDeleting, "the APIGateway is being deleted; managed controller Deployments are being removed"
	case operatorv1alpha1.StateError:
		cond.Reason = operatorv1alpha1.ReasonControllersDegraded
		if applyFailed {
			cond.Reason = operatorv1alpha1.ReasonApplyFailed
		}
	case operatorv1alpha1.StateProcessing:
		cond.Reason = operatorv1alpha1.ReasonControllersProgressing
	case operatorv1alpha1.StateWarning:
		cond.Reason = operatorv1alpha1.ReasonControllersBlocked
	default:
		cond.Status = metav1.ConditionTrue
		cond.Reason = operatorv1alpha1.ReasonAllControllersReady
		cond.Message = fmt.Sprintf("all %d enabled controllers are ready", len(enabled))
		if len(enabled) == 0 {
			cond.Reason, cond.Message = operatorv1alpha1.ReasonNoControllersEnabled, "no controller is enabled"
		}
	}
	if cond.Message == "" {
		cond.Message = strings.Join(notReady, "; ")
	}
	cond.Message = contract.Truncate(cond.Message, contract.ConditionMaxLength)
	meta.SetStatusCondition(conditions, cond)
}
