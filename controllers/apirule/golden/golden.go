package golden

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/controller"
)

// Writes is what the apirule controller writes for one APIRule.
type Writes struct {
	// Objects are the RequestAuthentications and AuthorizationPolicies,
	// then the route (VirtualService or HTTPRoute), in the order the
	// controller creates them, each controlled by the APIRule (so the
	// APIRule passed in must carry its UID).
	Objects []client.Object
	// Statuses are the APIRule's statuses in the order the controller
	// patches them; the last is the one it ends with (Ready, Applied).
	// Today that is the only one in both modes: in HTTPRoute mode the
	// controller writes a new route's first status once the Gateway's
	// controller answered (RoutePending only when no answer came within
	// its wait).
	Statuses []porticov1alpha1.APIRuleStatus
}

// Final is the status the controller ends with.
func (w Writes) Final() porticov1alpha1.APIRuleStatus { return w.Statuses[len(w.Statuses)-1] }

// For returns the writes of rule, whose backends have the pod selectors
// given; apiGateway (nil: none) resolves an APIRule that names no gateway.
// It fails where the controller would refuse the APIRule as written
// (InvalidRule, NoDefaultGateway, HostNotOnGateway).
func For(rule *porticov1alpha1.APIRule, apiGateway *operatorv1alpha1.APIGateway, selectors map[types.NamespacedName]map[string]string) (Writes, error) {
	objs, statuses, err := controller.Golden(rule, apiGateway, selectors)
	if err != nil {
		return Writes{}, err
	}
	return Writes{Objects: objs, Statuses: statuses}, nil
}
