package translate

import (
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/controllers/apirule/internal/render/gatewayapi"
	"github.com/portico-dev/portico/controllers/apirule/internal/render/istio"
)

// Input is an APIRule and what the cluster told about its backends.
type Input = plan.Input

// Output holds the desired objects: the route (a VirtualService, or an
// HTTPRoute in HTTPRoute mode) and the access control of the backends.
type Output struct {
	VirtualService *networkingv1.VirtualService `json:"VirtualService,omitempty"`
	HTTPRoute      *gwapiv1.HTTPRoute           `json:"HTTPRoute,omitempty"`
	// Workloads has the access control of every backend in the APIRule's
	// own namespace, in the order of Backends. Backends of other namespaces
	// get routes only: their namespace's own policies decide who may call
	// their pods.
	Workloads []Workload
}

// Workload is the access control of one backend Service's pods.
type Workload struct {
	Service               types.NamespacedName
	AuthorizationPolicy   *securityv1.AuthorizationPolicy
	RequestAuthentication *securityv1.RequestAuthentication // nil without JWT rules routed here
	// CustomPolicy hands the requests of the extAuth rules routed here to
	// their authorizer (action CUSTOM); nil without extAuth rules.
	CustomPolicy *securityv1.AuthorizationPolicy `json:",omitempty"`
}

// Object is a Kubernetes object; the package spells it out rather than
// import controller-runtime's client.Object, whose client-go dependencies
// would triple what the fuzz target has to build with instrumentation.
type Object interface {
	metav1.Object
	runtime.Object
}

// Route is the object that routes requests: the HTTPRoute in HTTPRoute
// mode, else the VirtualService.
func (o Output) Route() Object {
	if o.HTTPRoute != nil {
		return o.HTTPRoute
	}
	return o.VirtualService
}

// Objects returns every desired object, the route first.
func (o Output) Objects() []Object {
	objs := []Object{o.Route()}
	for _, w := range o.Workloads {
		objs = append(objs, w.AuthorizationPolicy)
		if w.RequestAuthentication != nil {
			objs = append(objs, w.RequestAuthentication)
		}
		if w.CustomPolicy != nil {
			objs = append(objs, w.CustomPolicy)
		}
	}
	return objs
}

// Translate builds the objects of an APIRule, or explains why the APIRule
// cannot be enforced as written: it plans the APIRule, checks the plan and
// renders it with the renderer of the APIRule's mode.
func Translate(in Input) (Output, error) {
	p := plan.New(in)
	if err := plan.Check(p); err != nil {
		return Output{}, err
	}
	var out Output
	if p.Parent != nil {
		out.HTTPRoute = gatewayapi.HTTPRoute(p)
	} else {
		out.VirtualService = istio.VirtualService(p)
	}
	for _, w := range p.Workloads {
		out.Workloads = append(out.Workloads, Workload{
			Service:               w.Service,
			AuthorizationPolicy:   istio.AuthorizationPolicy(p, w),
			RequestAuthentication: istio.RequestAuthentication(p, w),
			CustomPolicy:          istio.CustomPolicy(p, w),
		})
	}
	return out, nil
}
