package envoy

import (
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// ListenerOnPort is the listener bound to port, or nil.
func ListenerOnPort(listeners map[string]*listenerv3.Listener, port uint32) *listenerv3.Listener {
	for _, l := range listeners {
		if l.GetAddress().GetSocketAddress().GetPortValue() == port {
			return l
		}
	}
	return nil
}

// ChainForSNI is the chain of l Envoy picks for a TLS server name: the
// chain naming it exactly, else the one with the longest "*.suffix"
// covering it, else the first chain without server names, else the
// default chain.
func ChainForSNI(l *listenerv3.Listener, sni string) *listenerv3.FilterChain {
	var best *listenerv3.FilterChain
	score := -1
	sni = strings.ToLower(sni)
	for _, fc := range l.GetFilterChains() {
		names := fc.GetFilterChainMatch().GetServerNames()
		if len(names) == 0 && score < 0 {
			best, score = fc, 0
		}
		for _, n := range names {
			n = strings.ToLower(n)
			switch {
			case n == sni && sni != "":
				return fc
			case strings.HasPrefix(n, "*.") && strings.HasSuffix(sni, n[1:]) && len(n) > score:
				best, score = fc, len(n)
			}
		}
	}
	if best == nil {
		return l.GetDefaultFilterChain()
	}
	return best
}

// InboundChain is the chain of a sidecar's virtualInbound listener Envoy
// picks for a plain-text HTTP request to port: the one whose
// destination_port is port, else the catch-all one; chains for TLS
// (Istio's mutual TLS) or for other application protocols are left out.
// hasHTTP tells which chains serve HTTP.
func InboundChain(l *listenerv3.Listener, port int, hasHTTP func(*listenerv3.FilterChain) bool) *listenerv3.FilterChain {
	var catchAll *listenerv3.FilterChain
	for _, fc := range l.GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if tp := m.GetTransportProtocol(); tp != "" && tp != "raw_buffer" {
			continue
		}
		if ap := m.GetApplicationProtocols(); len(ap) > 0 && !slices.Contains(ap, "http/1.1") {
			continue
		}
		if !hasHTTP(fc) {
			continue
		}
		switch {
		case m.GetDestinationPort() != nil && int(m.GetDestinationPort().GetValue()) == port:
			return fc
		case m.GetDestinationPort() == nil && catchAll == nil:
			catchAll = fc
		}
	}
	return catchAll
}

// DownstreamTLS is a chain's TLS context, or nil for plain text.
func DownstreamTLS(fc *listenerv3.FilterChain) *tlsv3.DownstreamTlsContext {
	ts := fc.GetTransportSocket()
	if ts == nil {
		return nil
	}
	tc := &tlsv3.DownstreamTlsContext{}
	if err := ts.GetTypedConfig().UnmarshalTo(tc); err != nil {
		return nil
	}
	return tc
}
