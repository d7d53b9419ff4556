package explain

import (
	"fmt"
	"strings"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// maxPassed bounds the routes an explanation lists as tried before the one
// taken: a shared wildcard host may merge hundreds.
const maxPassed = 10

// ruleBehind says which rule of which APIRule a route of a VirtualService
// serves, the objects behind that, and the APIRule ("namespace/name", ""
// when the VirtualService is no APIRule's): the VirtualService's controller
// reference names the APIRule, and the route's name is the one the
// apirule controller gives that rule (gatewayv1alpha1.RouteName). An
// APIRule the caller may not read is named, not shown.
func ruleBehind(w World, vsKey, route string) (finding string, objects []string, apiRule string) {
	vs := findVirtualService(w.VirtualServices, vsKey)
	if vs == nil {
		return "", nil, ""
	}
	return ruleBehindOwner(w, "VirtualService", vsKey, vs, route, gatewayv1alpha1.RouteName)
}

// ruleBehindOwner is ruleBehind for a route object obj of a kind (a
// VirtualService, or an HTTPRoute whose rules the apirule controller names
// with gatewayv1alpha1.HTTPRouteRuleName): its controller reference names
// the APIRule by UID, and nameOf names the route of each of its rules.
func ruleBehindOwner(w World, kind, key string, obj metav1.Object, route string,
	nameOf func(namespace, apiRule string, rule gatewayv1alpha1.Rule) string) (finding string, objects []string, apiRule string) {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.Kind != "APIRule" || !strings.HasPrefix(owner.APIVersion, gatewayv1alpha1.GroupVersion.Group+"/") {
		return fmt.Sprintf("%s %s is not an APIRule's (no APIRule controller reference)", kind, key), nil, ""
	}
	ruleKey := obj.GetNamespace() + "/" + owner.Name
	for _, ar := range w.APIRules {
		if ar.Namespace != obj.GetNamespace() || ar.Name != owner.Name || ar.UID != owner.UID {
			continue
		}
		for i, rule := range ar.Spec.Rules {
			if nameOf(ar.Namespace, ar.Name, rule) == route {
				return fmt.Sprintf("rule %d (path %s%s) of APIRule %s", i, rule.Path, methods(rule), ruleKey),
					[]string{"APIRule " + ruleKey}, ruleKey
			}
		}
		return fmt.Sprintf("APIRule %s, whose rules no longer include this route (its controller has not caught up)", ruleKey),
			[]string{"APIRule " + ruleKey}, ruleKey
	}
	return fmt.Sprintf("APIRule %s (not visible to you, or gone)", ruleKey), nil, ruleKey
}

func findVirtualService(vss []*networkingv1.VirtualService, key string) *networkingv1.VirtualService {
	for _, vs := range vss {
		if vs.Namespace+"/"+vs.Name == key {
			return vs
		}
	}
	return nil
}

func methods(rule gatewayv1alpha1.Rule) string {
	if len(rule.Methods) == 0 {
		return ", every method"
	}
	ms := make([]string, len(rule.Methods))
	for i, m := range rule.Methods {
		ms[i] = string(m)
	}
	return ", methods " + strings.Join(ms, ",")
}

// passedSteps lists the routes tried before the one taken, with why each
// did not take the request, at most maxPassed of them.
func (e *Explanation) passedSteps(w World, passed []Passed) {
	for i, p := range passed {
		if i == maxPassed {
			e.step("passed", fmt.Sprintf("and %d more routes tried before it", len(passed)-maxPassed))
			return
		}
		behind, objects, _ := ruleBehind(w, p.VirtualService, p.Route)
		finding := fmt.Sprintf("route %q of VirtualService %s not taken: %s", p.Route, p.VirtualService, p.Why)
		if behind != "" {
			finding += " (" + behind + ")"
		}
		e.step("passed", finding, append([]string{"VirtualService " + p.VirtualService}, objects...)...)
	}
}
