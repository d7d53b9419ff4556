package gating

import (
	"fmt"
	"slices"
	"strings"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

// CRDState is what the operator observed of one CustomResourceDefinition
// (contract.StateOf).
type CRDState = contract.CRDState

// Cluster is the part of the cluster's state that gating reads.
type Cluster struct {
	// CRDs maps a CRD name to its state; an absent name is not installed.
	CRDs map[string]CRDState
	// Phases maps a controller to the phase already decided for it this round.
	Phases map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase
}

// Input is one controller's question: may it run?
type Input struct {
	Entry   catalog.Entry
	Enabled bool
	Cluster Cluster
	// Spec is the APIGateway's spec, nil for defaults: some CRDs are
	// required only while the spec chooses what needs them.
	Spec *operatorv1alpha1.APIGatewaySpec
}

// Result is the answer.
type Result struct {
	// Run is true when every check passed.
	Run bool
	// Phase is Disabled or Blocked when Run is false.
	Phase operatorv1alpha1.ControllerPhase
	// Reason is the failing check's documented reason.
	Reason string
	// Message explains the failure to a human.
	Message string
	// MissingCRDs names, as name/version, every required CRD that is not usable.
	MissingCRDs []string
}

// Check is one link of the chain. It returns failed=true with a phase,
// reason and message when the controller must not run.
type Check func(in Input) (result Result, failed bool)

// Chain is the ordered list of checks every controller goes through.
var Chain = []Check{CheckEnabled, CheckCRDs, CheckDependencies}

// Evaluate runs the chain and returns the first failure, or Run.
func Evaluate(in Input) Result {
	for _, check := range Chain {
		if r, failed := check(in); failed {
			return r
		}
	}
	return Result{Run: true}
}

// CheckEnabled fails when the controller is disabled in the spec.
func CheckEnabled(in Input) (Result, bool) {
	if in.Enabled {
		return Result{}, false
	}
	return Result{
		Phase:   operatorv1alpha1.PhaseDisabled,
		Reason:  operatorv1alpha1.ReasonDisabled,
		Message: fmt.Sprintf("%s is disabled in spec.controllers", in.Entry.Name),
	}, true
}

// CheckCRDs fails when any required CRD is missing, not Established, being
// deleted or not serving the required version. Every unusable CRD is listed;
// the reason is the most fundamental problem found (not found, then not
// established, then version not served).
func CheckCRDs(in Input) (Result, bool) {
	var notFound, notEstablished, notServed []string
	var because []string
	for _, crd := range in.Entry.CRDsFor(in.Spec) {
		state, ok := in.Cluster.CRDs[crd.Name]
		if !ok || !state.Established || state.Terminating || !slices.Contains(state.ServedVersions, crd.Version) {
			if why := in.Entry.SpecReason(crd); why != "" {
				because = append(because, fmt.Sprintf("%s is required because %s", crd, why))
			}
		}
		switch {
		case !ok:
			notFound = append(notFound, crd.String())
		case !state.Established || state.Terminating:
			notEstablished = append(notEstablished, crd.String())
		case !slices.Contains(state.ServedVersions, crd.Version):
			notServed = append(notServed, crd.String())
		}
	}
	missing := slices.Concat(notFound, notEstablished, notServed)
	if len(missing) == 0 {
		return Result{}, false
	}
	// The reason is that of the first kind of problem, in this order.
	var reason string
	var parts []string
	for _, p := range []struct {
		crds         []string
		reason, what string
	}{
		{notFound, operatorv1alpha1.ReasonCRDNotFound, "not installed"},
		{notEstablished, operatorv1alpha1.ReasonCRDNotEstablished, "not established or being deleted"},
		{notServed, operatorv1alpha1.ReasonCRDVersionNotServed, "version not served"},
	} {
		if len(p.crds) == 0 {
			continue
		}
		if reason == "" {
			reason = p.reason
		}
		parts = append(parts, p.what+": "+strings.Join(p.crds, ", "))
	}
	msg := fmt.Sprintf("waiting for required CRDs (%s)", strings.Join(parts, "; "))
	if len(because) > 0 {
		msg += "; " + strings.Join(because, "; ")
	}
	return Result{
		Phase:       operatorv1alpha1.PhaseBlocked,
		Reason:      reason,
		Message:     msg,
		MissingCRDs: missing,
	}, true
}

// CheckDependencies fails when a controller this one depends on is not Ready.
func CheckDependencies(in Input) (Result, bool) {
	var waiting []string
	for _, dep := range in.Entry.DependsOn {
		phase, ok := in.Cluster.Phases[dep]
		if !ok || phase != operatorv1alpha1.PhaseReady {
			if !ok {
				phase = "Unknown"
			}
			waiting = append(waiting, fmt.Sprintf("%s (%s)", dep, phase))
		}
	}
	if len(waiting) == 0 {
		return Result{}, false
	}
	return Result{
		Phase:   operatorv1alpha1.PhaseBlocked,
		Reason:  operatorv1alpha1.ReasonDependencyNotReady,
		Message: "waiting for controllers it depends on to be Ready: " + strings.Join(waiting, ", "),
	}, true
}
