package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// gatewayMessageMaxLength bounds what the APIRule repeats of a Gateway
// controller's message.
const gatewayMessageMaxLength = 256

// routeReadiness is the data plane's answer about an HTTPRoute: whether
// every status entry its Gateway's controller wrote for parent, at the
// route's generation, says Accepted and ResolvedRefs. Otherwise it returns
// the APIRule's reason (RoutePending, RouteNotAccepted) and a message
// naming the refusing Gateway with its controller's reason and message.
func routeReadiness(route *gwapiv1.HTTPRoute, parent *porticov1alpha1.ParentReference) (reason, msg string) {
	gateway := parent.Namespace + "/" + parent.Name
	if parent.SectionName != "" {
		gateway += " (listener " + parent.SectionName + ")"
	}
	var pending bool
	found := false
	for i := range route.Status.Parents {
		ps := &route.Status.Parents[i]
		if !sameParent(ps.ParentRef, parent, route.Namespace) {
			continue
		}
		found = true
		for _, t := range []string{string(gwapiv1.RouteConditionAccepted), string(gwapiv1.RouteConditionResolvedRefs)} {
			c := meta.FindStatusCondition(ps.Conditions, t)
			switch {
			case c == nil || c.ObservedGeneration < route.Generation || c.Status == metav1.ConditionUnknown:
				pending = true
			case c.Status == metav1.ConditionFalse:
				what := "did not accept"
				if t == string(gwapiv1.RouteConditionResolvedRefs) {
					what = "could not resolve the references of"
				}
				return porticov1alpha1.ReasonRouteNotAccepted, fmt.Sprintf("Gateway %s (controller %s) %s HTTPRoute %s/%s: %s: %s",
					gateway, ps.ControllerName, what, route.Namespace, route.Name, c.Reason,
					contract.Truncate(strings.TrimSpace(c.Message), gatewayMessageMaxLength))
			}
		}
	}
	if !found || pending {
		return porticov1alpha1.ReasonRoutePending, fmt.Sprintf(
			"HTTPRoute %s/%s is written; waiting for the controller of Gateway %s to accept it and resolve its references", route.Namespace, route.Name, gateway)
	}
	return "", ""
}

// routeWritten is the message of an APIRule whose HTTPRoute was just
// written, before its Gateway's controller could answer.
func routeWritten(route *gwapiv1.HTTPRoute, parent *porticov1alpha1.ParentReference) string {
	return fmt.Sprintf("HTTPRoute %s/%s is written; waiting for the controller of Gateway %s/%s to accept it",
		route.Namespace, route.Name, parent.Namespace, parent.Name)
}

// sameParent reports whether a route status entry's parentRef is parent,
// reading the Gateway API's defaults (group gateway.networking.k8s.io, kind
// Gateway, the route's namespace).
func sameParent(ref gwapiv1.ParentReference, parent *porticov1alpha1.ParentReference, routeNamespace string) bool {
	group, kind, ns, section := porticov1alpha1.GatewayAPIGroup, "Gateway", routeNamespace, ""
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if ref.SectionName != nil {
		section = string(*ref.SectionName)
	}
	return group == parent.Group && kind == parent.Kind && ns == parent.Namespace && string(ref.Name) == parent.Name && section == parent.SectionName
}
