package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func TestRouteReadiness(t *testing.T) {
	parent := &gatewayv1alpha1.ParentReference{Group: gatewayv1alpha1.GatewayAPIGroup, Kind: "Gateway", Namespace: "infra", Name: "edge"}
	ref := gatewayapiv1.ParentReference{Namespace: ptr.To(gatewayapiv1.Namespace("infra")), Name: "edge"}
	cond := func(t string, s metav1.ConditionStatus, gen int64) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "Because" + t, Message: "said the gateway", ObservedGeneration: gen}
	}
	entry := func(ref gatewayapiv1.ParentReference, conds ...metav1.Condition) gatewayapiv1.RouteParentStatus {
		return gatewayapiv1.RouteParentStatus{ParentRef: ref, ControllerName: "istio.io/gateway-controller", Conditions: conds}
	}
	accepted := func(gen int64) gatewayapiv1.RouteParentStatus {
		return entry(ref, cond("Accepted", metav1.ConditionTrue, gen), cond("ResolvedRefs", metav1.ConditionTrue, gen))
	}
	otherGateway := gatewayapiv1.ParentReference{Namespace: ptr.To(gatewayapiv1.Namespace("infra")), Name: "other"}
	otherListener := ref
	otherListener.SectionName = ptr.To(gatewayapiv1.SectionName("https"))
	for name, tc := range map[string]struct {
		parents    []gatewayapiv1.RouteParentStatus
		wantReason string
		wantInMsg  string
	}{
		"no status yet":                         {nil, gatewayv1alpha1.ReasonRoutePending, "waiting for the controller of Gateway infra/edge"},
		"accepted with references resolved":     {[]gatewayapiv1.RouteParentStatus{accepted(2)}, "", ""},
		"accepted for an older generation":      {[]gatewayapiv1.RouteParentStatus{accepted(1)}, gatewayv1alpha1.ReasonRoutePending, "waiting"},
		"only another Gateway answered":         {[]gatewayapiv1.RouteParentStatus{entry(otherGateway, cond("Accepted", metav1.ConditionTrue, 2), cond("ResolvedRefs", metav1.ConditionTrue, 2))}, gatewayv1alpha1.ReasonRoutePending, "waiting"},
		"another listener's answer is not ours": {[]gatewayapiv1.RouteParentStatus{entry(otherListener, cond("Accepted", metav1.ConditionTrue, 2), cond("ResolvedRefs", metav1.ConditionTrue, 2))}, gatewayv1alpha1.ReasonRoutePending, "waiting"},
		"accepted without ResolvedRefs":         {[]gatewayapiv1.RouteParentStatus{entry(ref, cond("Accepted", metav1.ConditionTrue, 2))}, gatewayv1alpha1.ReasonRoutePending, "waiting"},
		"not accepted": {[]gatewayapiv1.RouteParentStatus{entry(ref, cond("Accepted", metav1.ConditionFalse, 2), cond("ResolvedRefs", metav1.ConditionTrue, 2))},
			gatewayv1alpha1.ReasonRouteNotAccepted, "Gateway infra/edge (controller istio.io/gateway-controller) did not accept HTTPRoute shop/orders: BecauseAccepted: said the gateway"},
		"references not resolved": {[]gatewayapiv1.RouteParentStatus{entry(ref, cond("Accepted", metav1.ConditionTrue, 2), cond("ResolvedRefs", metav1.ConditionFalse, 2))},
			gatewayv1alpha1.ReasonRouteNotAccepted, "could not resolve the references of HTTPRoute shop/orders: BecauseResolvedRefs"},
		"a refusal wins over another entry's acceptance": {[]gatewayapiv1.RouteParentStatus{accepted(2), entry(ref, cond("Accepted", metav1.ConditionFalse, 2))},
			gatewayv1alpha1.ReasonRouteNotAccepted, "did not accept"},
	} {
		t.Run(name, func(t *testing.T) {
			route := &gatewayapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 2}}
			route.Status.Parents = tc.parents
			reason, msg := routeReadiness(route, parent)
			if reason != tc.wantReason || !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("routeReadiness = %q, %q; want %q with %q", reason, msg, tc.wantReason, tc.wantInMsg)
			}
		})
	}
	// A Gateway's long message is bounded.
	route := &gatewayapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 1}}
	long := cond("Accepted", metav1.ConditionFalse, 1)
	long.Message = strings.Repeat("x", 10000)
	route.Status.Parents = []gatewayapiv1.RouteParentStatus{entry(ref, long)}
	if _, msg := routeReadiness(route, parent); len(msg) > 600 {
		t.Errorf("message of %d bytes", len(msg))
	}
}

func TestReferenceGranted(t *testing.T) {
	grant := func(fromGroup, fromKind, fromNS, toGroup, toKind string, toName *string) gatewayapiv1beta1.ReferenceGrant {
		g := gatewayapiv1beta1.ReferenceGrant{}
		g.Spec.From = []gatewayapiv1beta1.ReferenceGrantFrom{{Group: gatewayapiv1.Group(fromGroup), Kind: gatewayapiv1.Kind(fromKind), Namespace: gatewayapiv1.Namespace(fromNS)}}
		to := gatewayapiv1beta1.ReferenceGrantTo{Group: gatewayapiv1.Group(toGroup), Kind: gatewayapiv1.Kind(toKind)}
		if toName != nil {
			to.Name = ptr.To(gatewayapiv1.ObjectName(*toName))
		}
		g.Spec.To = []gatewayapiv1beta1.ReferenceGrantTo{to}
		return g
	}
	gw := gatewayapiv1.GroupName
	for name, tc := range map[string]struct {
		grants []gatewayapiv1beta1.ReferenceGrant
		want   bool
	}{
		"no grant":                       {nil, false},
		"the Service by name":            {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Service", ptr.To("ledger"))}, true},
		"every Service":                  {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Service", nil)}, true},
		"another Service":                {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Service", ptr.To("vault"))}, false},
		"another namespace's routes":     {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "team-b", "", "Service", nil)}, false},
		"GRPCRoutes only":                {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "GRPCRoute", "shop", "", "Service", nil)}, false},
		"Secrets only":                   {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Secret", nil)}, false},
		"from and to in separate grants": {[]gatewayapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Secret", nil), grant(gw, "GRPCRoute", "shop", "", "Service", nil)}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := referenceGranted(tc.grants, "shop", "ledger"); got != tc.want {
				t.Errorf("referenceGranted = %v, want %v", got, tc.want)
			}
		})
	}
}
