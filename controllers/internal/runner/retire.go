package runner

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// retireTimeout bounds the clean-up on the way out: within the pod's
// termination grace period (contract.TerminationGracePeriodSeconds), after
// the workers stopped.
const retireTimeout = contract.RetireSeconds * time.Second

// Wanted reports whether the APIGateway still asks for the named controller:
// it exists, is not being deleted, and does not disable it. Scaling to zero
// replicas keeps a controller wanted (its objects stay in force); a missing
// APIGateway, or one being deleted, wants none.
func Wanted(gw *operatorv1alpha1.APIGateway, name string) bool {
	if gw == nil || !gw.DeletionTimestamp.IsZero() {
		return false
	}
	return gw.Spec.ControllerEnabled(operatorv1alpha1.ControllerName(name))
}

// retireIfUnwanted runs c.Retire when the process stops because the
// APIGateway no longer wants the controller, so that what it wrote does not
// keep acting with nobody left to maintain it. A rolling update or a
// scale-down stops the process too; then the APIGateway still wants the
// controller and nothing is removed.
func retireIfUnwanted(cfg *rest.Config, scheme *runtime.Scheme, c Controller) (retired bool, _ error) {
	ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
	defer cancel()
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return false, fmt.Errorf("retire: %w", err)
	}
	gw := &operatorv1alpha1.APIGateway{}
	switch err := cl.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); {
	case apierrors.IsNotFound(err):
		gw = nil
	case err != nil:
		// Cannot tell: leave everything in force rather than guess.
		return false, fmt.Errorf("retire: read APIGateway %s: %w", operatorv1alpha1.SingletonName, err)
	}
	if Wanted(gw, string(c.Contract.Name)) {
		return false, nil
	}
	if err := c.Retire(ctx, cl); err != nil {
		return false, fmt.Errorf("retire: %w", err)
	}
	return true, nil
}
