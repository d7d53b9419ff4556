package olm

import (
	"fmt"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	apierrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

// K8sVersion is the Kubernetes version the deprecated-API validator checks
// the bundle against (its k8s-version optional value): the control plane
// Portico is tested on.
const K8sVersion = "1.36"

// DefaultValidators are the validators `operator-sdk bundle validate` runs
// on every bundle.
var DefaultValidators = validation.DefaultBundleValidators

// OperatorFrameworkSuite is the optional suite `operator-sdk bundle
// validate --select-optional suite=operatorframework` adds: OperatorHub's
// metadata rules, the standard capabilities and categories, good practices
// and deprecated APIs.
var OperatorFrameworkSuite = interfaces.Validators{
	validation.OperatorHubV2Validator,
	validation.StandardCapabilitiesValidator,
	validation.StandardCategoriesValidator,
	validation.GoodPracticesValidator,
	validation.AlphaDeprecatedAPIsValidator,
}

// Report is what the validators found: each entry names the object
// (CSV, CRD or bundle) and the problem.
type Report struct {
	Errors   []string
	Warnings []string
}

// ValidateBundle loads the bundle directory dir (manifests/, metadata/) as
// operator-sdk does and runs DefaultValidators and OperatorFrameworkSuite
// on it. The error is for a bundle that cannot be loaded at all.
func ValidateBundle(dir string) (Report, error) {
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return Report{}, fmt.Errorf("load bundle %s: %w", dir, err)
	}
	objs := bundle.ObjectsToValidate()
	results := DefaultValidators.Validate(objs...)
	// The optional validators also see the bundle's other objects and the
	// optional values, as operator-sdk passes them.
	optional := append([]any{}, objs...)
	for _, obj := range bundle.Objects {
		optional = append(optional, obj)
	}
	optional = append(optional, map[string]string{"k8s-version": K8sVersion})
	results = append(results, OperatorFrameworkSuite.Validate(optional...)...)
	return report(results), nil
}

func report(results []apierrors.ManifestResult) Report {
	var r Report
	for _, res := range results {
		for _, e := range res.Errors {
			r.Errors = append(r.Errors, res.Name+": "+e.Error())
		}
		for _, w := range res.Warnings {
			r.Warnings = append(r.Warnings, res.Name+": "+w.Error())
		}
	}
	return r
}
