package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// routeHostIndex finds HTTPRoutes by their hostnames (routeHostKeys).
const routeHostIndex = "httproute.hosts"

// maxSharedRoutesNamed bounds how many routes the HostShared message names.
const maxSharedRoutesNamed = 5

// setHostShared sets the HostShared condition of an APIRule in HTTPRoute
// mode: whether an HTTPRoute that is not the APIRule's own claims one of
// its hosts on its Gateway. Portico does not control such routes (tenants
// may write HTTPRoutes themselves); the Gateway merges the rules of every
// route of a host, so the condition tells the APIRule's owner. Routes of
// other namespaces are not named.
func (r *Reconciler) setHostShared(ctx context.Context, rule *porticov1alpha1.APIRule, parent *porticov1alpha1.ParentReference) error {
	if parent == nil || !r.Installed.HTTPRoutes {
		meta.RemoveStatusCondition(&rule.Status.Conditions, porticov1alpha1.ConditionHostShared)
		return nil
	}
	seen := map[types.UID]bool{}
	var named []string
	others, host := 0, ""
	for _, key := range append(overlapKeys(rule), anyHostKey(parent.Namespace, parent.Name)) {
		var routes gwapiv1.HTTPRouteList
		if err := r.Client.List(ctx, &routes, client.MatchingFields{routeHostIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("list the HTTPRoutes that may claim %s: %w", strings.TrimPrefix(key, "h:"), err)
		}
		for i := range routes.Items {
			route := &routes.Items[i]
			if seen[route.UID] || owns(rule, route) || !onParent(route, parent) {
				continue
			}
			seen[route.UID] = true
			h := sharedHost(rule, route)
			if h == "" {
				continue
			}
			host = h
			if route.Namespace == rule.Namespace && len(named) < maxSharedRoutesNamed {
				named = append(named, route.Name)
			} else {
				others++
			}
		}
	}
	c := noForeignRoute(rule)
	if len(named)+others > 0 {
		slices.Sort(named)
		var who []string
		if len(named) > 0 {
			who = append(who, "HTTPRoute "+strings.Join(named, ", ")+" of this namespace")
		}
		if others > 0 {
			who = append(who, fmt.Sprintf("%d HTTPRoute(s) of this namespace or others", others))
		}
		c.Status, c.Reason = metav1.ConditionTrue, porticov1alpha1.ReasonForeignRoute
		c.Message = fmt.Sprintf("%s, not written by Portico, also claim host %s (or one overlapping it) on Gateway %s/%s: "+
			"the Gateway merges the rules of every route of a host, so some requests for it may be served by those routes, "+
			"and Portico's host ownership does not cover routes it did not write", strings.Join(who, " and "), host, parent.Namespace, parent.Name)
	}
	meta.SetStatusCondition(&rule.Status.Conditions, c)
	return nil
}

// noForeignRoute is the HostShared condition of an APIRule in HTTPRoute
// mode whose hosts no HTTPRoute Portico did not write claims.
func noForeignRoute(rule *porticov1alpha1.APIRule) metav1.Condition {
	return metav1.Condition{Type: porticov1alpha1.ConditionHostShared, Status: metav1.ConditionFalse, Reason: porticov1alpha1.ReasonNoForeignRoute,
		Message: "no other HTTPRoute claims a host of the APIRule on its Gateway", ObservedGeneration: rule.Generation}
}

// onParent reports whether an HTTPRoute attaches to parent's Gateway: the
// same Gateway, and the same listener unless either names none.
func onParent(route *gwapiv1.HTTPRoute, parent *porticov1alpha1.ParentReference) bool {
	for _, ref := range route.Spec.ParentRefs {
		if ref.Group != nil && string(*ref.Group) != porticov1alpha1.GatewayAPIGroup || ref.Kind != nil && string(*ref.Kind) != "Gateway" {
			continue
		}
		ns := route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if ns != parent.Namespace || string(ref.Name) != parent.Name {
			continue
		}
		if ref.SectionName == nil || parent.SectionName == "" || string(*ref.SectionName) == parent.SectionName {
			return true
		}
	}
	return false
}

// onDefaultGateway reports whether a route names a Gateway with the
// default gateway's name.
func onDefaultGateway(route *gwapiv1.HTTPRoute) bool {
	for _, ref := range route.Spec.ParentRefs {
		if string(ref.Name) == operatorv1alpha1.DefaultGatewayName {
			return true
		}
	}
	return false
}

// sharedHost returns a host of the APIRule that the route also serves, or
// "": a route without hostnames serves them all.
func sharedHost(rule *porticov1alpha1.APIRule, route *gwapiv1.HTTPRoute) string {
	for _, h := range rule.Spec.Hosts {
		if len(route.Spec.Hostnames) == 0 {
			return string(h)
		}
		for _, rh := range route.Spec.Hostnames {
			if hosts.Overlap(string(h), strings.ToLower(string(rh))) {
				return string(h)
			}
		}
	}
	return ""
}

// routes maps an HTTPRoute to its APIRule when the controller labelled it,
// and to the APIRules in HTTPRoute mode whose hosts it may share: those on
// its Gateways with a host overlapping one of its hostnames (all of those
// Gateways' APIRules for a route without hostnames).
func (m mapper) routes(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := toAPIRuleRequests(o)
	route, ok := o.(*gwapiv1.HTTPRoute)
	if !ok {
		return reqs
	}
	keep := func(a *porticov1alpha1.APIRule) bool {
		if owns(a, route) {
			return false
		}
		if p := plan.Parent(a); p != nil {
			return onParent(route, p)
		}
		// On the default gateway, which may be a Gateway API Gateway: the
		// reconcile knows.
		return a.Spec.Gateway == "" && onDefaultGateway(route)
	}
	var candidates []porticov1alpha1.APIRule
	if len(route.Spec.Hostnames) == 0 {
		onDefault := false
		for _, ref := range route.Spec.ParentRefs {
			ns := route.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			candidates = append(candidates, m.list(ctx, client.MatchingFields{gatewayIndex: gatewayAPIKey(ns, string(ref.Name))})...)
			onDefault = onDefault || m.isDefaultGateway(ctx, ns, string(ref.Name))
		}
		if onDefault {
			// Every APIRule on the default gateway shares its hosts with
			// this route; a route on another namespace's Gateway of that
			// name shares none.
			candidates = append(candidates, m.list(ctx, client.MatchingFields{gatewayIndex: defaultGatewayKey})...)
		}
	} else {
		probe := &porticov1alpha1.APIRule{}
		for _, h := range route.Spec.Hostnames {
			probe.Spec.Hosts = append(probe.Spec.Hosts, porticov1alpha1.Hostname(strings.ToLower(string(h))))
		}
		for _, key := range overlapKeys(probe) {
			candidates = append(candidates, m.list(ctx, client.MatchingFields{hostIndex: key})...)
		}
	}
	seen := map[types.UID]bool{}
	for i := range candidates {
		a := &candidates[i]
		if seen[a.UID] || !keep(a) || sharedHost(a, route) == "" {
			continue
		}
		seen[a.UID] = true
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(a)})
	}
	return reqs
}
