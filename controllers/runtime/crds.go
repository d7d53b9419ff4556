package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CRD names a CustomResourceDefinition and the version a controller needs.
type CRD struct {
	Name    string
	Version string
}

// String renders the CRD as name/version.
func (c CRD) String() string { return c.Name + "/" + c.Version }

// usable reports whether crd is Established, not being deleted and serves
// the version.
func usable(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	if crd == nil || crd.DeletionTimestamp != nil {
		return false
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	served := slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == version && v.Served
	})
	return established && served
}

// availability is which of the watched CRDs are usable right now.
type availability struct {
	missing  []string // required CRDs that are not usable
	optional []string // optional CRDs that are usable
}

func (a availability) ready() bool { return len(a.missing) == 0 }

func (a availability) String() string {
	return fmt.Sprintf("missing=%s optional=%s", strings.Join(a.missing, ","), strings.Join(a.optional, ","))
}

func (a availability) equal(b availability) bool {
	return slices.Equal(a.missing, b.missing) && slices.Equal(a.optional, b.optional)
}

// evaluate decides availability from a lookup of CRDs by name.
func evaluate(required, optional []CRD, get func(name string) *apiextensionsv1.CustomResourceDefinition) availability {
	var a availability
	for _, c := range required {
		if !usable(get(c.Name), c.Version) {
			a.missing = append(a.missing, c.String())
		}
	}
	for _, c := range optional {
		if usable(get(c.Name), c.Version) {
			a.optional = append(a.optional, c.String())
		}
	}
	return a
}

// stripCRD keeps what the watchdog reads of a CRD; schemas are dropped so
// memory does not grow with the cluster's CRDs.
func stripCRD(watched []string) func(any) (any, error) {
	return func(in any) (any, error) {
		crd, ok := in.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return in, nil
		}
		out := &apiextensionsv1.CustomResourceDefinition{
			TypeMeta: crd.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name: crd.Name, UID: crd.UID, ResourceVersion: crd.ResourceVersion, DeletionTimestamp: crd.DeletionTimestamp,
			},
		}
		if !slices.Contains(watched, crd.Name) {
			return out, nil
		}
		out.Spec.Group = crd.Spec.Group
		out.Spec.Names.Kind = crd.Spec.Names.Kind
		for _, v := range crd.Spec.Versions {
			out.Spec.Versions = append(out.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v.Name, Served: v.Served})
		}
		out.Status.Conditions = crd.Status.Conditions
		return out, nil
	}
}

// awaitDiscovery waits until every required CRD's kind resolves through the
// workers' REST mapper. A CRD is Established a moment before API discovery
// lists it; starting the workers in that moment would make their watches
// log errors until discovery catches up. The wait is bounded and only runs
// when workers are about to start.
func awaitDiscovery(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, required []CRD) error {
	for _, c := range required {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := reader.Get(ctx, client.ObjectKey{Name: c.Name}, crd); err != nil {
			return fmt.Errorf("read CRD %s: %w", c.Name, err)
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 10, Cap: 2 * time.Second},
			func(context.Context) (bool, error) {
				_, err := mapper.RESTMapping(gk, c.Version)
				return err == nil, nil
			})
		if err != nil {
			return fmt.Errorf("%s is established but API discovery does not serve %s/%s yet: %w", c.Name, gk, c.Version, err)
		}
	}
	return nil
}
