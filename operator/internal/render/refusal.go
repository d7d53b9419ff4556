package render

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

// Refusal reports whether the operator must refuse to render the
// controller's spec, and why (a message naming what is wrong). A refused
// controller is reported with reason InvalidSpec and its objects are left
// as they are. Admission checks the shape of the fields; this checks what
// only the operator knows: which flags the controller's binary takes, which
// of them the operator sets, and values a schema cannot bound.
func Refusal(entry catalog.Entry, spec operatorv1alpha1.ControllerSpec) (message string, refused bool) {
	checks := []func(catalog.Entry, operatorv1alpha1.ControllerSpec) (string, bool){checkExtraArgs, checkDisruptionBudget}
	for _, check := range checks {
		if message, refused := check(entry, spec); refused {
			return message, true
		}
	}
	return "", false
}

// checkExtraArgs accepts each extraArgs entry only as --name=value of a
// flag the controller declares that the operator does not set.
func checkExtraArgs(entry catalog.Entry, spec operatorv1alpha1.ControllerSpec) (string, bool) {
	for _, arg := range spec.ExtraArgs {
		name, _, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		switch {
		case !strings.HasPrefix(arg, "--") || !hasValue || name == "":
			return fmt.Sprintf("extraArgs entry %q is not a flag in the form --name=value", arg), true
		case slices.Contains(entry.Reserved(), name):
			return fmt.Sprintf("extraArgs flag --%s is set by the operator and may not be overridden", name), true
		case !slices.Contains(entry.Flags, name):
			return fmt.Sprintf("extraArgs flag --%s is not a flag of %s (it takes: %s)", name, entry.Binary(), strings.Join(settableFlags(entry), ", ")), true
		}
	}
	return "", false
}

// settableFlags are the flags extraArgs may set, as --name.
func settableFlags(entry catalog.Entry) []string {
	var out []string
	for _, f := range entry.Flags {
		if !slices.Contains(entry.Reserved(), f) {
			out = append(out, "--"+f)
		}
	}
	slices.Sort(out)
	return out
}

// checkDisruptionBudget refuses a negative number: the schema cannot bound
// an int-or-string, and the API server would refuse the budget.
func checkDisruptionBudget(_ catalog.Entry, spec operatorv1alpha1.ControllerSpec) (string, bool) {
	budget := spec.PodDisruptionBudget
	if budget == nil {
		return "", false
	}
	fields := []struct {
		name  string
		value *intstr.IntOrString
	}{{"minAvailable", budget.MinAvailable}, {"maxUnavailable", budget.MaxUnavailable}}
	for _, f := range fields {
		if f.value != nil && f.value.Type == intstr.Int && f.value.IntVal < 0 {
			return fmt.Sprintf("podDisruptionBudget.%s must not be negative, not %d", f.name, f.value.IntVal), true
		}
	}
	return "", false
}
