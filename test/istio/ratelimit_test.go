package istio

import (
	"maps"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"

	"github.com/portico-dev/portico/e2e/envoy"
)

// TestStandInsReadTheRateLimitFiltersIstiodGenerates runs istiod's
// configuration generation for the gateway of every gateway-wide
// EnvoyFilter of the ratelimit controller's corpus, and reads the HTTP
// filters istiod inserted as the e2e's xDS gateway stand-in does
// (envoy.UnpackTyped, envoy.Descriptors): each of Portico's rate limit
// filters must arrive (istiod passes its TypedStruct through unchanged),
// read as Envoy's RateLimit or LocalRateLimit with what the EnvoyFilter
// says, and its descriptors must be computable for a request. Without it
// the stand-in had ignored every global limit on the node: it read only
// the message itself, never a TypedStruct of it.
func TestStandInsReadTheRateLimitFiltersIstiodGenerates(t *testing.T) {
	objs := controllerObjects(t)
	var global, local int
	for _, name := range slices.Sorted(maps.Keys(objs)) {
		if !strings.HasPrefix(name, "ratelimit.") || !strings.HasSuffix(name, ".gateway.object.yaml") {
			continue
		}
		ef := typed[networkingv1alpha3.EnvoyFilter](t, objs[name])
		labels := ef.Spec.GetWorkloadSelector().GetLabels()
		gw := config.Config{
			Meta: config.Meta{GroupVersionKind: gvk.Gateway, Namespace: ef.Namespace, Name: "public"},
			Spec: &networking.Gateway{Selector: labels, Servers: []*networking.Server{
				{Port: &networking.Port{Number: gatewayPort, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*/orders.example.com"}},
			}},
		}
		filter := config.Config{
			Meta: config.Meta{GroupVersionKind: gvk.EnvoyFilter, Namespace: ef.Namespace, Name: ef.Name},
			Spec: proto.Clone(&ef.Spec).(*networking.EnvoyFilter),
		}
		cg := core.NewConfigGenTest(t, core.TestOptions{Configs: []config.Config{gw, filter}})
		proxy := cg.SetupProxy(&model.Proxy{Type: model.Router, Labels: labels,
			Metadata: &model.NodeMetadata{Namespace: ef.Namespace, Labels: labels}, ConfigNamespace: ef.Namespace})
		listeners := map[string]*listenerv3.Listener{}
		for _, l := range cg.Listeners(proxy) {
			listeners[l.GetName()] = l
		}
		l := envoy.ListenerOnPort(listeners, gatewayPort)
		if l == nil {
			t.Fatalf("%s: istiod generated no listener on %d: %v", name, gatewayPort, keys(listeners))
		}
		hcm := chainHCM(envoy.ChainForSNI(l, ""))
		var ours int
		for _, f := range hcm.GetHttpFilters() {
			if !strings.HasPrefix(f.GetName(), "portico.") {
				continue
			}
			ours++
			globalCfg, localCfg := &ratelimitv3.RateLimit{}, &localratelimitv3.LocalRateLimit{}
			isGlobal, err := envoy.UnpackTyped(f.GetTypedConfig(), globalCfg)
			if err != nil {
				t.Errorf("%s: filter %s: %v", name, f.GetName(), err)
				continue
			}
			isLocal, err := envoy.UnpackTyped(f.GetTypedConfig(), localCfg)
			if err != nil {
				t.Errorf("%s: filter %s: %v", name, f.GetName(), err)
				continue
			}
			switch {
			case isGlobal:
				global++
				if globalCfg.GetDomain() == "" || globalCfg.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() == "" {
					t.Errorf("%s: filter %s read without its domain or service: %v", name, f.GetName(), globalCfg)
				}
				req := envoy.Request{Method: "GET", Host: "orders.example.com", Path: "/login", Headers: map[string]string{"x-plan": "free", "x-api-key": "k"}}
				if _, err := envoy.Descriptors(globalCfg.GetRateLimits(), req, "10.0.0.1", nil); err != nil {
					t.Errorf("%s: filter %s: descriptors: %v", name, f.GetName(), err)
				}
			case isLocal:
				local++
			default:
				t.Errorf("%s: filter %s of type %s is read as neither RateLimit nor LocalRateLimit", name, f.GetName(), f.GetTypedConfig().GetTypeUrl())
			}
		}
		if ours == 0 {
			t.Errorf("%s: istiod inserted none of the EnvoyFilter's filters into the gateway's listener", name)
		}
	}
	if global == 0 || local == 0 {
		t.Fatalf("read %d global and %d local rate limit filters from istiod's listeners, want some of each", global, local)
	}
	t.Logf("read %d global and %d local rate limit filters as istiod generated them", global, local)
}
