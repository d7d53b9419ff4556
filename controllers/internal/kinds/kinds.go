package kinds

import (
	"maps"

	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/owned"
)

// The kinds Portico's controllers write, each described once; a
// controller's owned.Table lists those it writes.
var (
	VirtualServices = owned.Proto("VirtualService", func(o *networkingv1.VirtualService) proto.Message { return &o.Spec },
		func(l *networkingv1.VirtualServiceList) []*networkingv1.VirtualService { return l.Items })
	AuthorizationPolicies = owned.Proto("AuthorizationPolicy", func(o *securityv1.AuthorizationPolicy) proto.Message { return &o.Spec },
		func(l *securityv1.AuthorizationPolicyList) []*securityv1.AuthorizationPolicy { return l.Items })
	RequestAuthentications = owned.Proto("RequestAuthentication", func(o *securityv1.RequestAuthentication) proto.Message { return &o.Spec },
		func(l *securityv1.RequestAuthenticationList) []*securityv1.RequestAuthentication { return l.Items })
	IstioGateways = owned.Proto("Istio Gateway", func(o *networkingv1.Gateway) proto.Message { return &o.Spec },
		func(l *networkingv1.GatewayList) []*networkingv1.Gateway { return l.Items })
	HTTPRoutes = owned.Struct("HTTPRoute", func(o *gwapiv1.HTTPRoute) *gwapiv1.HTTPRouteSpec { return &o.Spec },
		func(dst, src *gwapiv1.HTTPRoute) { dst.Spec = *src.Spec.DeepCopy() },
		func(l *gwapiv1.HTTPRouteList) []*gwapiv1.HTTPRoute { return pointers(l.Items) })
	GatewayAPIGateways = owned.Struct("Gateway API Gateway", func(o *gwapiv1.Gateway) *gwapiv1.GatewaySpec { return &o.Spec },
		func(dst, src *gwapiv1.Gateway) { dst.Spec = *src.Spec.DeepCopy() },
		func(l *gwapiv1.GatewayList) []*gwapiv1.Gateway { return pointers(l.Items) })
	EnvoyFilters = owned.Proto("EnvoyFilter", func(o *networkingv1alpha3.EnvoyFilter) proto.Message { return &o.Spec },
		func(l *networkingv1alpha3.EnvoyFilterList) []*networkingv1alpha3.EnvoyFilter { return l.Items })
	// ConfigMaps' "spec" is their data (binaryData is not written).
	ConfigMaps = owned.Struct("ConfigMap", func(o *corev1.ConfigMap) *map[string]string { return &o.Data },
		func(dst, src *corev1.ConfigMap) { dst.Data = maps.Clone(src.Data) },
		func(l *corev1.ConfigMapList) []*corev1.ConfigMap { return pointers(l.Items) })
)

// pointers points at the items of a list whose items are values.
func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
