package controller

import (
	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/controllers/internal/owned"
)

// written is every kind the controller creates and updates through its
// write path (Secrets, ConfigMaps and Certificates have their own writes:
// immutable types, data it renews).
var written = owned.Table{
	owned.Proto("Istio Gateway", func(o *networkingv1.Gateway) proto.Message { return &o.Spec },
		func(l *networkingv1.GatewayList) []*networkingv1.Gateway { return l.Items }),
	owned.Proto("VirtualService", func(o *networkingv1.VirtualService) proto.Message { return &o.Spec },
		func(l *networkingv1.VirtualServiceList) []*networkingv1.VirtualService { return l.Items }),
	owned.Struct("Gateway API Gateway", func(o *gwapiv1.Gateway) *gwapiv1.GatewaySpec { return &o.Spec },
		func(dst, src *gwapiv1.Gateway) { dst.Spec = *src.Spec.DeepCopy() },
		func(l *gwapiv1.GatewayList) []*gwapiv1.Gateway { return pointers(l.Items) }),
	owned.Struct("HTTPRoute", func(o *gwapiv1.HTTPRoute) *gwapiv1.HTTPRouteSpec { return &o.Spec },
		func(dst, src *gwapiv1.HTTPRoute) { dst.Spec = *src.Spec.DeepCopy() },
		func(l *gwapiv1.HTTPRouteList) []*gwapiv1.HTTPRoute { return pointers(l.Items) }),
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// writer is the controller's write path (package owned), counting its
// writes as create, update and delete do.
func (r *Reconciler) writer() *owned.Writer {
	return &owned.Writer{Client: r.Client, Reader: r.Reader, Kinds: written,
		Written: func(obj client.Object, _, operation string) { r.written(obj, operation) }}
}
