package gating

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
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
	// Namespace is Portico's (the operator's) namespace.
	Namespace string
	// Secrets are the Secrets of Portico's namespace the spec names, by
	// name; an absent name does not exist.
	Secrets map[string]SecretState
}

// SecretState is what gating reads of a Secret: its keys, and the value
// of the Redis Secret's address (host:port, not a credential).
type SecretState struct {
	// Keys are the Secret's data keys.
	Keys []string
	// Address is the value of key address.
	Address string
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
var Chain = []Check{CheckEnabled, CheckGlobalRateLimits, CheckCRDs, CheckDependencies}

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

// CheckGlobalRateLimits fails, for an entry that needs the global rate
// limits' configuration, while spec.rateLimits.global is not set
// (Disabled, NotConfigured) or its Redis Secret does not exist in Portico's
// namespace with a host:port address (Blocked, SecretNotFound or
// SecretInvalid).
func CheckGlobalRateLimits(in Input) (Result, bool) {
	if !in.Entry.NeedsGlobalRateLimits {
		return Result{}, false
	}
	global := in.Spec.GlobalRateLimits()
	if global == nil {
		return Result{
			Phase:   operatorv1alpha1.PhaseDisabled,
			Reason:  operatorv1alpha1.ReasonNotConfigured,
			Message: "spec.rateLimits.global is not set",
		}, true
	}
	ref := in.Cluster.Namespace + "/" + global.Redis.SecretName
	secret, ok := in.Cluster.Secrets[global.Redis.SecretName]
	switch {
	case !ok:
		return Result{
			Phase:   operatorv1alpha1.PhaseBlocked,
			Reason:  operatorv1alpha1.ReasonSecretNotFound,
			Message: fmt.Sprintf("waiting for Secret %s with key %s (spec.rateLimits.global.redis.secretName): it does not exist", ref, contract.RedisAddressKey),
		}, true
	case !slices.Contains(secret.Keys, contract.RedisAddressKey):
		return Result{
			Phase:   operatorv1alpha1.PhaseBlocked,
			Reason:  operatorv1alpha1.ReasonSecretNotFound,
			Message: fmt.Sprintf("waiting for Secret %s with key %s (spec.rateLimits.global.redis.secretName): it has no key %s", ref, contract.RedisAddressKey, contract.RedisAddressKey),
		}, true
	}
	if _, err := RedisPort(secret.Address); err != nil {
		return Result{
			Phase:   operatorv1alpha1.PhaseBlocked,
			Reason:  operatorv1alpha1.ReasonSecretInvalid,
			Message: fmt.Sprintf("Secret %s: key %s must be host:port, such as redis.example.com:6379: %v", ref, contract.RedisAddressKey, err),
		}, true
	}
	return Result{}, false
}

// RedisPort is the port of a Redis address, host:port.
func RedisPort(address string) (int32, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(address))
	if err != nil {
		return 0, err
	}
	if host == "" {
		return 0, errors.New("no host")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return int32(n), nil
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
