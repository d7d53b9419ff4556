package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/contract"
)

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
func evaluate(required, optional []contract.CRD, get func(name string) *apiextensionsv1.CustomResourceDefinition) availability {
	var a availability
	for _, c := range required {
		if !c.Usable(get(c.Name)) {
			a.missing = append(a.missing, c.String())
		}
	}
	for _, c := range optional {
		if c.Usable(get(c.Name)) {
			a.optional = append(a.optional, c.String())
		}
	}
	return a
}

// awaitDiscovery waits until every required CRD's kind resolves through the
// workers' REST mapper. A CRD is Established a moment before API discovery
// lists it; starting the workers in that moment would make their watches
// log errors until discovery catches up. The wait is bounded and only runs
// when workers are about to start.
func awaitDiscovery(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, required []contract.CRD) error {
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
