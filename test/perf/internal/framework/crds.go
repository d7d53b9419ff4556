package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/testenv"
)

// crdPoll is how often the CRD helpers look again.
const crdPoll = 200 * time.Millisecond

// ApplyCRDs installs CRDs with server-side apply (field manager owner,
// forced) and waits until every one is Established. CRDs an earlier run
// left terminating are waited for first: applying one would not bring it
// back.
func ApplyCRDs(ctx context.Context, c client.Client, owner string, crds []*apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	if err := WaitCRDsNotTerminating(ctx, c, names, timeout); err != nil {
		return err
	}
	for _, crd := range crds {
		u, err := CRDManifest(crd)
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}
	return WaitCRDsEstablished(ctx, c, names, timeout)
}

// CRDManifest is a CRD as a manifest to apply or create: no status, no
// server-set metadata.
func CRDManifest(crd *apiextensionsv1.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	u.SetKind("CustomResourceDefinition")
	unstructured.RemoveNestedField(u.Object, "status")
	for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	return u, nil
}

// waitCRDs polls every named CRD until ok holds for it.
func waitCRDs(ctx context.Context, c client.Reader, names []string, timeout time.Duration, what string,
	ok func(*apiextensionsv1.CustomResourceDefinition) (bool, error)) error {
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, crdPoll, timeout, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return false, err
				}
				crd = nil
			}
			return ok(crd)
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be %s: %w", name, what, err)
		}
	}
	return nil
}

// WaitCRDsEstablished waits until every named CRD is Established. A CRD
// being deleted is an error.
func WaitCRDsEstablished(ctx context.Context, c client.Reader, names []string, timeout time.Duration) error {
	return waitCRDs(ctx, c, names, timeout, "Established", func(crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
		if crd == nil {
			return false, nil
		}
		state := contract.StateOf(crd)
		if crd.DeletionTimestamp != nil {
			return false, fmt.Errorf("CRD %s is being deleted; retry once it is gone", crd.Name)
		}
		return state.Established, nil
	})
}

// WaitCRDsNotTerminating waits until no named CRD is being deleted. The API
// server's CRD finalizer backs off exponentially after failures, so this
// may take minutes after an interrupted run.
func WaitCRDsNotTerminating(ctx context.Context, c client.Reader, names []string, timeout time.Duration) error {
	return waitCRDs(ctx, c, names, timeout, "removed or not terminating", func(crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
		return crd == nil || crd.DeletionTimestamp == nil, nil
	})
}

// WaitCRDsGone waits until no named CRD exists.
func WaitCRDsGone(ctx context.Context, c client.Reader, names []string, timeout time.Duration) error {
	return waitCRDs(ctx, c, names, timeout, "removed", func(crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
		return crd == nil, nil
	})
}

// PorticoAndIstioCRDs are the CRDs of a cluster with Portico and Istio:
// Portico's own (config/crd/bases) and every CRD of the istio.io/api
// module.
func PorticoAndIstioCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range testenv.ProjectCRDPaths() {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			got, err := testenv.ReadCRDs(f)
			if err != nil {
				return nil, err
			}
			crds = append(crds, got...)
		}
	}
	istio, err := testenv.IstioCRDs()
	if err != nil {
		return nil, err
	}
	return append(crds, istio...), nil
}

// FindCRD returns the CRD of crds named like c.
func FindCRD(crds []*apiextensionsv1.CustomResourceDefinition, c contract.CRD) (*apiextensionsv1.CustomResourceDefinition, error) {
	for _, crd := range crds {
		if crd.Name == c.Name {
			return crd, nil
		}
	}
	return nil, fmt.Errorf("no CRD %s among the %d installed", c.Name, len(crds))
}
