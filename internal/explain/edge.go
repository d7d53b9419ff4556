package explain

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

// The edge: how Istio's ingress gateway (Envoy with use_remote_address
// true and xff_num_trusted_hops set to the gateway's numTrustedProxies)
// learns a client's address, what it forwards, and what the backend's
// sidecar (use_remote_address false, xff_num_trusted_hops 0) then takes
// for remote.ip, the attribute remoteIpBlocks matches.

// Arrival is a request as it reaches the gateway.
type Arrival struct {
	// Peer is the address of the connection the gateway accepts: the
	// client's, or the last proxy's in front of the gateway.
	Peer netip.Addr
	// Headers the request arrives with, by lower-case name; the client
	// (and every proxy in front) may have written any of them,
	// X-Forwarded-For included ("a, b").
	Headers map[string]string
}

// EdgeGateway is the gateway's configuration that decides a client's
// address: how many proxies in front of it append to X-Forwarded-For.
type EdgeGateway struct {
	TrustedProxies int
}

// ClientAddress is the address the gateway takes for the client's (Envoy's
// trusted client address, its downstream remote address from then on):
// with n trusted proxies, the n-th X-Forwarded-For entry from the right,
// counting the peer's address Envoy appends as the first; with fewer
// entries than that, or an entry that is not an address, the peer's.
func (gw EdgeGateway) ClientAddress(a Arrival) netip.Addr {
	chain := append(forwardedFor(a.Headers), a.Peer.String())
	i := len(chain) - 1 - gw.TrustedProxies
	if i < 0 {
		return a.Peer
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(chain[i]))
	if err != nil {
		return a.Peer
	}
	return addr
}

// Forwarded is the request the gateway forwards to a backend.
type Forwarded struct {
	Headers map[string]string
	// RemoteIP is what the backend's sidecar takes for remote.ip: the last
	// X-Forwarded-For entry, or the gateway's own address without one.
	RemoteIP netip.Addr
}

// gatewayPodIP is the gateway's own address, which the sidecar sees as the
// peer (IngressGateway.IP).
var gatewayPodIP = IngressGateway.IP

// Forward is what the gateway sends a backend for a request that took
// route: Envoy appends the peer's address to X-Forwarded-For, then the
// route's operations apply, removals first. The one command operator
// Portico writes, %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%, is the client
// address; any other is not modelled.
func (gw EdgeGateway) Forward(route *Routed, a Arrival) (Forwarded, error) {
	headers := map[string]string{}
	for name, value := range a.Headers {
		headers[strings.ToLower(name)] = value
	}
	headers["x-forwarded-for"] = strings.Join(append(forwardedFor(a.Headers), a.Peer.String()), ", ")
	for _, name := range route.RemovedRequestHeaders {
		delete(headers, strings.ToLower(name))
	}
	for _, name := range slices.Sorted(maps.Keys(route.RequestHeaders)) {
		value := route.RequestHeaders[name]
		switch {
		case value == "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%":
			value = gw.ClientAddress(a).String()
		case strings.Contains(value, "%"):
			return Forwarded{}, fmt.Errorf("header %s: command operator %q is not modelled", name, value)
		}
		headers[strings.ToLower(name)] = value
	}
	out := Forwarded{Headers: headers, RemoteIP: gatewayPodIP}
	if chain := forwardedFor(headers); len(chain) > 0 {
		if addr, err := netip.ParseAddr(strings.TrimSpace(chain[len(chain)-1])); err == nil {
			out.RemoteIP = addr
		}
	}
	return out, nil
}

// At is the request the backend's sidecar judges: the forwarded request to
// a workload, from the gateway, with its remote address.
func (f Forwarded) At(w Workload, host, path, method string) Request {
	from := IngressGateway
	from.RemoteIP = f.RemoteIP
	return Request{Workload: w, Host: host, Path: path, Method: method, Headers: f.Headers, From: from}
}

// Respond is the response the client receives when the backend answers
// with headers (by lower-case name, each with its values): the route's
// removals, then set (replacing), then add (appending).
func (route *Routed) Respond(backend map[string][]string) map[string][]string {
	out := map[string][]string{}
	for name, values := range backend {
		out[strings.ToLower(name)] = slices.Clone(values)
	}
	for _, name := range route.RemovedResponse {
		delete(out, strings.ToLower(name))
	}
	for name, value := range route.ResponseSet {
		out[strings.ToLower(name)] = []string{value}
	}
	for name, value := range route.ResponseAdd {
		out[strings.ToLower(name)] = append(out[strings.ToLower(name)], value)
	}
	return out
}

func (route *Routed) addResponseHeaders(ops *networkingv1alpha3.Headers_HeaderOperations) {
	route.RemovedResponse = append(route.RemovedResponse, ops.GetRemove()...)
	for name, value := range ops.GetSet() {
		if route.ResponseSet == nil {
			route.ResponseSet = map[string]string{}
		}
		route.ResponseSet[name] = value
	}
	for name, value := range ops.GetAdd() {
		if route.ResponseAdd == nil {
			route.ResponseAdd = map[string]string{}
		}
		route.ResponseAdd[name] = value
	}
}

// forwardedFor splits X-Forwarded-For into its entries.
func forwardedFor(headers map[string]string) []string {
	for name, value := range headers {
		if strings.EqualFold(name, "x-forwarded-for") && strings.TrimSpace(value) != "" {
			return strings.Split(value, ",")
		}
	}
	return nil
}
