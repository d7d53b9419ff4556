package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/translate"
)

// Golden returns what Reconcile writes for an APIRule that passes every
// check (its hosts its own, its backends ordinary Services of its namespace
// with the pod selectors given, its gateway present, no route Portico did
// not write on its hosts), with HTTPRoute mode on: the objects in the
// order it writes them, and every status it writes, the last the one it
// ends with (in HTTPRoute mode too: a new route's first status waits for
// the Gateway controller's answer). apiGateway (nil: none)
// resolves an APIRule that names no gateway. It reads nothing and runs the
// functions Reconcile runs, so it cannot drift from what the controller
// writes.
func Golden(rule *porticov1alpha1.APIRule, apiGateway *operatorv1alpha1.APIGateway,
	selectors map[types.NamespacedName]map[string]string) ([]client.Object, []porticov1alpha1.APIRuleStatus, error) {
	gateway, parent, reason, msg := gatewayOf(rule, apiGateway)
	if reason != "" {
		return nil, nil, fmt.Errorf("%s: %s", reason, msg)
	}
	var grants *operatorv1alpha1.APIRulesSpec
	if apiGateway != nil {
		grants = apiGateway.Spec.APIRules
	}
	out, err := translate.Translate(translate.Input{APIRule: rule, Selectors: selectors, Gateway: gateway, Parent: parent, TrustedProxies: trustedProxies(grants)})
	if err != nil {
		return nil, nil, err
	}
	desired := desiredObjects(out)
	status := func(ready metav1.ConditionStatus, reason, msg string) porticov1alpha1.APIRuleStatus {
		r := rule.DeepCopy()
		setReady(r, ready, reason, msg)
		// As setHostShared leaves it after the Ready condition.
		if parent != nil {
			meta.SetStatusCondition(&r.Status.Conditions, noForeignRoute(r))
		} else {
			meta.RemoveStatusCondition(&r.Status.Conditions, porticov1alpha1.ConditionHostShared)
		}
		return r.Status
	}
	// In HTTPRoute mode the first status waits for the Gateway's answer
	// (routeAnswerWait), so it is the final one too.
	return desired, []porticov1alpha1.APIRuleStatus{status(metav1.ConditionTrue, porticov1alpha1.ReasonApplied, appliedMessage(desired))}, nil
}
