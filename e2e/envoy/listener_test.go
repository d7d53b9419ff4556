package envoy

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestChainForSNI(t *testing.T) {
	chain := func(name string, names ...string) *listenerv3.FilterChain {
		return &listenerv3.FilterChain{Name: name, FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: names}}
	}
	l := &listenerv3.Listener{FilterChains: []*listenerv3.FilterChain{
		chain("wild", "*.example.com"), chain("longer", "*.shop.example.com"), chain("exact", "orders.example.com"), chain("any"),
	}}
	for sni, want := range map[string]string{"orders.example.com": "exact", "a.shop.example.com": "longer", "b.example.com": "wild", "other.org": "any", "": "any"} {
		if got := ChainForSNI(l, sni).GetName(); got != want {
			t.Errorf("%q: %q, want %q", sni, got, want)
		}
	}
}

func TestInboundChain(t *testing.T) {
	chain := func(name string, port uint32, transport string, protocols ...string) *listenerv3.FilterChain {
		m := &listenerv3.FilterChainMatch{TransportProtocol: transport, ApplicationProtocols: protocols}
		if port != 0 {
			m.DestinationPort = wrapperspb.UInt32(port)
		}
		return &listenerv3.FilterChain{Name: name, FilterChainMatch: m}
	}
	l := &listenerv3.Listener{FilterChains: []*listenerv3.FilterChain{
		chain("8080-mtls", 8080, "tls", "istio"), chain("8080-plain", 8080, "raw_buffer"),
		chain("catchall-tcp", 0, "raw_buffer"), chain("catchall-http", 0, "raw_buffer", "http/1.1", "h2c"),
	}}
	http := func(fc *listenerv3.FilterChain) bool { return fc.GetName() != "catchall-tcp" }
	if got := InboundChain(l, 8080, http).GetName(); got != "8080-plain" {
		t.Errorf("port 8080: %q", got)
	}
	if got := InboundChain(l, 9090, http).GetName(); got != "catchall-http" {
		t.Errorf("port 9090: %q", got)
	}
}
