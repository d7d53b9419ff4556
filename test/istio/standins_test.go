package istio

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	networking "istio.io/api/networking/v1alpha3"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"

	"github.com/portico-dev/portico/e2e/envoy"
)

func chainHCM(fc *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	for _, f := range fc.GetFilters() {
		h := &hcmv3.HttpConnectionManager{}
		if f.GetTypedConfig().MessageIs(h) && f.GetTypedConfig().UnmarshalTo(h) == nil {
			return h
		}
	}
	return nil
}

// TestStandInsFindWhatIstiodGenerates: the e2e's xDS stand-ins pick
// listeners, filter chains, route names and SDS names from istiod's
// configuration as e2e/envoy reads it; here that reading is checked
// against the listeners istiod generates for an ingress gateway (an HTTP
// and a MUTUAL HTTPS server) and for a sidecar.
func TestStandInsFindWhatIstiodGenerates(t *testing.T) {
	gw := config.Config{
		Meta: config.Meta{GroupVersionKind: gvk.Gateway, Namespace: "istio-system", Name: "public"},
		Spec: &networking.Gateway{Selector: map[string]string{gatewaySelName: gatewaySelVal}, Servers: []*networking.Server{
			{Port: &networking.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*/orders.example.com"}},
			{Port: &networking.Port{Number: 443, Name: "https", Protocol: "HTTPS"}, Hosts: []string{"*/orders.example.com"},
				Tls: &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_MUTUAL, CredentialName: "orders-cert"}},
		}},
	}
	cg := core.NewConfigGenTest(t, core.TestOptions{Configs: []config.Config{gw}})
	proxy := cg.SetupProxy(&model.Proxy{Type: model.Router, Labels: map[string]string{gatewaySelName: gatewaySelVal},
		Metadata: &model.NodeMetadata{Namespace: "istio-system", Labels: map[string]string{gatewaySelName: gatewaySelVal}}, ConfigNamespace: "istio-system"})
	listeners := map[string]*listenerv3.Listener{}
	for _, l := range cg.Listeners(proxy) {
		listeners[l.GetName()] = l
	}
	routes := map[string]bool{}
	for _, rc := range cg.Routes(proxy) {
		routes[rc.GetName()] = true
	}

	plain := envoy.ListenerOnPort(listeners, 80)
	if plain == nil {
		t.Fatalf("no listener on 80 among %v", keys(listeners))
	}
	if h := chainHCM(envoy.ChainForSNI(plain, "")); h == nil || !routes[h.GetRds().GetRouteConfigName()] {
		t.Errorf("the plain listener's chain names route %q, generated: %v", h.GetRds().GetRouteConfigName(), routes)
	}
	secure := envoy.ListenerOnPort(listeners, 443)
	if secure == nil {
		t.Fatalf("no listener on 443 among %v", keys(listeners))
	}
	fc := envoy.ChainForSNI(secure, "orders.example.com")
	if h := chainHCM(fc); h == nil || !routes[h.GetRds().GetRouteConfigName()] {
		t.Errorf("the TLS chain for orders.example.com names route %q, generated: %v", h.GetRds().GetRouteConfigName(), routes)
	}
	tc := envoy.DownstreamTLS(fc)
	certs := tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
	cas := tc.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
	if len(certs) != 1 || certs[0].GetName() != "kubernetes://orders-cert" || cas.GetName() != "kubernetes://orders-cert-cacert" || !tc.GetRequireClientCertificate().GetValue() {
		t.Errorf("the TLS chain's SDS names %v and %v, client certificate required %v; the stand-in reads kubernetes://orders-cert and kubernetes://orders-cert-cacert",
			certs, cas, tc.GetRequireClientCertificate())
	}

	side := core.NewConfigGenTest(t, core.TestOptions{})
	sidecar := side.SetupProxy(&model.Proxy{Labels: map[string]string{"app": "orders"}, Metadata: &model.NodeMetadata{Namespace: "shop", Labels: map[string]string{"app": "orders"}}, ConfigNamespace: "shop"})
	inbound := map[string]*listenerv3.Listener{}
	for _, l := range side.Listeners(sidecar) {
		inbound[l.GetName()] = l
	}
	chain := envoy.InboundChain(inbound[model.VirtualInboundListenerName], 8080, func(fc *listenerv3.FilterChain) bool { return chainHCM(fc) != nil })
	if chain.GetName() != model.VirtualInboundCatchAllHTTPFilterChainName {
		t.Errorf("a plain-text request to 8080 of a pod no Service selects takes chain %q, want %s", chain.GetName(), model.VirtualInboundCatchAllHTTPFilterChainName)
	}
}

func keys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
