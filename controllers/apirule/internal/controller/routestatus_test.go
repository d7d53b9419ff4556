package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func TestRouteReadiness(t *testing.T) {
	parent := &porticov1alpha1.ParentReference{Group: porticov1alpha1.GatewayAPIGroup, Kind: "Gateway", Namespace: "infra", Name: "edge"}
	ref := gwapiv1.ParentReference{Namespace: ptr.To(gwapiv1.Namespace("infra")), Name: "edge"}
	cond := func(t string, s metav1.ConditionStatus, gen int64) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "Because" + t, Message: "said the gateway", ObservedGeneration: gen}
	}
	entry := func(ref gwapiv1.ParentReference, conds ...metav1.Condition) gwapiv1.RouteParentStatus {
		return gwapiv1.RouteParentStatus{ParentRef: ref, ControllerName: "istio.io/gateway-controller", Conditions: conds}
	}
	accepted := func(gen int64) gwapiv1.RouteParentStatus {
		return entry(ref, cond("Accepted", metav1.ConditionTrue, gen), cond("ResolvedRefs", metav1.ConditionTrue, gen))
	}
	otherGateway := gwapiv1.ParentReference{Namespace: ptr.To(gwapiv1.Namespace("infra")), Name: "other"}
	otherListener := ref
	otherListener.SectionName = ptr.To(gwapiv1.SectionName("https"))
	for name, tc := range map[string]struct {
		parents    []gwapiv1.RouteParentStatus
		wantReason string
		wantInMsg  string
	}{
		"no status yet":                         {nil, porticov1alpha1.ReasonRoutePending, "waiting for the controller of Gateway infra/edge"},
		"accepted with references resolved":     {[]gwapiv1.RouteParentStatus{accepted(2)}, "", ""},
		"accepted for an older generation":      {[]gwapiv1.RouteParentStatus{accepted(1)}, porticov1alpha1.ReasonRoutePending, "waiting"},
		"only another Gateway answered":         {[]gwapiv1.RouteParentStatus{entry(otherGateway, cond("Accepted", metav1.ConditionTrue, 2), cond("ResolvedRefs", metav1.ConditionTrue, 2))}, porticov1alpha1.ReasonRoutePending, "waiting"},
		"another listener's answer is not ours": {[]gwapiv1.RouteParentStatus{entry(otherListener, cond("Accepted", metav1.ConditionTrue, 2), cond("ResolvedRefs", metav1.ConditionTrue, 2))}, porticov1alpha1.ReasonRoutePending, "waiting"},
		"accepted without ResolvedRefs":         {[]gwapiv1.RouteParentStatus{entry(ref, cond("Accepted", metav1.ConditionTrue, 2))}, porticov1alpha1.ReasonRoutePending, "waiting"},
		"not accepted": {[]gwapiv1.RouteParentStatus{entry(ref, cond("Accepted", metav1.ConditionFalse, 2), cond("ResolvedRefs", metav1.ConditionTrue, 2))},
			porticov1alpha1.ReasonRouteNotAccepted, "Gateway infra/edge (controller istio.io/gateway-controller) did not accept HTTPRoute shop/orders: BecauseAccepted: said the gateway"},
		"references not resolved": {[]gwapiv1.RouteParentStatus{entry(ref, cond("Accepted", metav1.ConditionTrue, 2), cond("ResolvedRefs", metav1.ConditionFalse, 2))},
			porticov1alpha1.ReasonRouteNotAccepted, "could not resolve the references of HTTPRoute shop/orders: BecauseResolvedRefs"},
		"a refusal wins over another entry's acceptance": {[]gwapiv1.RouteParentStatus{accepted(2), entry(ref, cond("Accepted", metav1.ConditionFalse, 2))},
			porticov1alpha1.ReasonRouteNotAccepted, "did not accept"},
	} {
		t.Run(name, func(t *testing.T) {
			route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 2}}
			route.Status.Parents = tc.parents
			reason, msg := routeReadiness(route, parent)
			if reason != tc.wantReason || !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("routeReadiness = %q, %q; want %q with %q", reason, msg, tc.wantReason, tc.wantInMsg)
			}
		})
	}
	// A Gateway's long message is bounded.
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 1}}
	long := cond("Accepted", metav1.ConditionFalse, 1)
	long.Message = strings.Repeat("x", 10000)
	route.Status.Parents = []gwapiv1.RouteParentStatus{entry(ref, long)}
	if _, msg := routeReadiness(route, parent); len(msg) > 600 {
		t.Errorf("message of %d bytes", len(msg))
	}
}

func TestReferenceGranted(t *testing.T) {
	grant := func(fromGroup, fromKind, fromNS, toGroup, toKind string, toName *string) gwapiv1beta1.ReferenceGrant {
		g := gwapiv1beta1.ReferenceGrant{}
		g.Spec.From = []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.Group(fromGroup), Kind: gwapiv1.Kind(fromKind), Namespace: gwapiv1.Namespace(fromNS)}}
		to := gwapiv1beta1.ReferenceGrantTo{Group: gwapiv1.Group(toGroup), Kind: gwapiv1.Kind(toKind)}
		if toName != nil {
			to.Name = ptr.To(gwapiv1.ObjectName(*toName))
		}
		g.Spec.To = []gwapiv1beta1.ReferenceGrantTo{to}
		return g
	}
	gw := gwapiv1.GroupName
	for name, tc := range map[string]struct {
		grants []gwapiv1beta1.ReferenceGrant
		want   bool
	}{
		"no grant":                       {nil, false},
		"the Service by name":            {[]gwapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Service", ptr.To("ledger"))}, true},
		"every Service":                  {[]gwapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Service", nil)}, true},
		"another Service":                {[]gwapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Service", ptr.To("vault"))}, false},
		"another namespace's routes":     {[]gwapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "team-b", "", "Service", nil)}, false},
		"GRPCRoutes only":                {[]gwapiv1beta1.ReferenceGrant{grant(gw, "GRPCRoute", "shop", "", "Service", nil)}, false},
		"Secrets only":                   {[]gwapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Secret", nil)}, false},
		"from and to in separate grants": {[]gwapiv1beta1.ReferenceGrant{grant(gw, "HTTPRoute", "shop", "", "Secret", nil), grant(gw, "GRPCRoute", "shop", "", "Service", nil)}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := referenceGranted(tc.grants, "shop", "ledger"); got != tc.want {
				t.Errorf("referenceGranted = %v, want %v", got, tc.want)
			}
		})
	}
}
