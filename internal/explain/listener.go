package explain

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
)

// The listener: which server of an Istio Gateway takes a request, by the
// port it arrives on (the gateway Service's port, which Istio's servers
// name), its scheme and its host (the SNI of a TLS request); what the
// server's TLS settings ask of the client (a client certificate of a CA);
// and which VirtualServices its hosts admit ("namespace/host" entries).

// Arriving is how a request reaches the gateway: the port, whether over
// TLS, and the client certificate it presents (PEM, nil for none).
type Arriving struct {
	Port       uint32
	TLS        bool
	ClientCert []byte
}

// DefaultPort is the port of a request that names none: 443 over TLS, else 80.
func (a Arriving) DefaultPort() uint32 {
	switch {
	case a.Port != 0:
		return a.Port
	case a.TLS:
		return 443
	}
	return 80
}

func (a Arriving) scheme() string {
	if a.TLS {
		return "https"
	}
	return "http"
}

// Taken is the listener decision: the server (or Gateway API listener)
// that takes the request, what it says, and the outcome when the listener
// itself decides (a refused connection, a redirect to HTTPS, a host no
// server takes); Outcome is empty when routing goes on.
type Taken struct {
	Finding string
	Outcome Outcome
	Reason  string
	// hosts are the server's hosts entries that cover the request's host
	// (Istio mode): they decide which VirtualServices the server admits.
	hosts []string
	// server names the server that takes the request.
	server string
}

// istioServer finds the server of Istio Gateway gw that takes a request to
// host arriving as a: a server of the port whose protocol is the scheme's
// (HTTP for http, HTTPS for https) and whose
// hosts cover the host, the most specific first (an exact host, then the
// longest wildcard). No server on the port refuses the connection; over
// TLS, a host no server covers fails the handshake (no certificate for the
// SNI); over HTTP the gateway answers 404.
func istioServer(gw *networkingv1.Gateway, host string, a Arriving, clientCAs map[string][]byte) Taken {
	key := gw.Namespace + "/" + gw.Name
	port := a.DefaultPort()
	var onPort []*networkingv1alpha3.Server
	for _, s := range gw.Spec.Servers {
		if s.GetPort().GetNumber() == port && protocolServes(s, a.TLS) {
			onPort = append(onPort, s)
		}
	}
	if len(onPort) == 0 {
		why := fmt.Sprintf("no server of Gateway %s takes %s on port %d: the connection is refused", key, a.scheme(), port)
		return Taken{Finding: why, Outcome: OutcomeRefused, Reason: why}
	}
	var best *networkingv1alpha3.Server
	bestRank := -1
	var covering []string
	for _, s := range onPort {
		for _, h := range s.Hosts {
			if rank := hostRank(serverHost(h), host); rank > bestRank {
				best, bestRank = s, rank
			}
		}
	}
	if best == nil {
		why := fmt.Sprintf("no server of Gateway %s on port %d has a host covering %s", key, port, host)
		if a.TLS {
			return Taken{Finding: why, Outcome: OutcomeRefused, Reason: why + ": the TLS handshake fails (no certificate for that name)"}
		}
		return Taken{Finding: why, Outcome: Outcome404, Reason: why}
	}
	for _, h := range best.Hosts {
		if hostRank(serverHost(h), host) >= 0 {
			covering = append(covering, h)
		}
	}
	t := Taken{hosts: covering, server: serverName(best), Finding: fmt.Sprintf("server %s of Gateway %s: port %d, %s, hosts %s%s", serverName(best), key, port,
		best.GetPort().GetProtocol(), strings.Join(best.Hosts, ","), tlsSays(best.GetTls()))}
	tls := best.GetTls()
	switch {
	case !a.TLS && tls.GetHttpsRedirect():
		t.Outcome, t.Reason = OutcomeRouted, fmt.Sprintf("the gateway answers itself: 301 to https://%s (server %s redirects HTTP to HTTPS)", host, serverName(best))
	case a.TLS && (tls.GetMode() == networkingv1alpha3.ServerTLSSettings_MUTUAL ||
		tls.GetMode() == networkingv1alpha3.ServerTLSSettings_OPTIONAL_MUTUAL && len(a.ClientCert) > 0):
		// OPTIONAL_MUTUAL asks for a certificate and checks one presented.
		t.Outcome, t.Reason = clientCertificate(tls, a.ClientCert, clientCAs)
		if t.Outcome == OutcomeRouted {
			t.Finding += "; " + t.Reason
			t.Outcome, t.Reason = "", ""
		}
	}
	return t
}

// protocolServes reports whether a server of that protocol takes a request
// over TLS (tls) or plain HTTP.
func protocolServes(s *networkingv1alpha3.Server, tls bool) bool {
	switch strings.ToUpper(s.GetPort().GetProtocol()) {
	case "HTTPS":
		return tls
	case "HTTP", "HTTP2":
		return !tls
	}
	return false
}

// serverHost is the host part of a server's hosts entry ("namespace/host").
func serverHost(entry string) string {
	if _, h, ok := strings.Cut(entry, "/"); ok {
		return h
	}
	return entry
}

// admits reports whether a server hosts entry admits a VirtualService of
// namespace ns: "host" and "*/host" any namespace, "./host" the Gateway's,
// "ns/host" that namespace's.
func admits(entry, gatewayNamespace, ns string) bool {
	scope, _, ok := strings.Cut(entry, "/")
	switch {
	case !ok || scope == "*":
		return true
	case scope == ".":
		return ns == gatewayNamespace
	}
	return scope == ns
}

// hostRank is how specifically pattern covers host: -1 not at all, else
// higher for more specific (an exact host over any wildcard, a longer
// wildcard over a shorter one, "*" last).
func hostRank(pattern, host string) int {
	pattern, host = strings.ToLower(pattern), strings.ToLower(host)
	switch {
	case pattern == host:
		return 1 << 20
	case pattern == "*":
		return 0
	case strings.HasPrefix(pattern, "*.") && strings.HasSuffix(host, pattern[1:]) && len(host) > len(pattern)-1:
		return len(pattern)
	}
	return -1
}

func serverName(s *networkingv1alpha3.Server) string {
	if s.GetName() != "" {
		return s.GetName()
	}
	if s.GetPort().GetName() != "" {
		return s.GetPort().GetName()
	}
	return fmt.Sprintf("on port %d", s.GetPort().GetNumber())
}

func tlsSays(tls *networkingv1alpha3.ServerTLSSettings) string {
	switch {
	case tls == nil:
		return ""
	case tls.GetHttpsRedirect():
		return ", redirects HTTP to HTTPS"
	case tls.GetMode() == networkingv1alpha3.ServerTLSSettings_MUTUAL:
		return fmt.Sprintf(", TLS %s with credential %s, client certificates of %s required", tls.GetMode(), tls.GetCredentialName(), caName(tls))
	case tls.GetMode() == networkingv1alpha3.ServerTLSSettings_OPTIONAL_MUTUAL:
		return fmt.Sprintf(", TLS %s with credential %s, client certificates of %s checked when presented", tls.GetMode(), tls.GetCredentialName(), caName(tls))
	}
	return fmt.Sprintf(", TLS %s with credential %s", tls.GetMode(), tls.GetCredentialName())
}

// caName is the credential holding a MUTUAL server's client CAs: its
// caCertCredentialName, else its credential's "-cacert" companion.
func caName(tls *networkingv1alpha3.ServerTLSSettings) string {
	if n := tls.GetCaCertCredentialName(); n != "" {
		return n
	}
	return tls.GetCredentialName() + "-cacert"
}

// clientCertificate decides a MUTUAL server's handshake: a request without
// a certificate, or with one no CA of the server's bundle signed for client
// authentication, is refused; a bundle the caller may not read is said,
// and the certificate assumed good.
func clientCertificate(tls *networkingv1alpha3.ServerTLSSettings, certPEM []byte, clientCAs map[string][]byte) (Outcome, string) {
	name := caName(tls)
	if len(certPEM) == 0 {
		return OutcomeRefused, fmt.Sprintf("the server requires a client certificate of %s and the request presents none: the TLS handshake fails", name)
	}
	bundle, ok := clientCAs[name]
	if !ok {
		return OutcomeRouted, fmt.Sprintf("client certificate NOT checked: the CA bundle %s is not visible to you", name)
	}
	if err := VerifyClientCertificate(certPEM, bundle); err != nil {
		return OutcomeRefused, fmt.Sprintf("the client certificate is not one of %s (%v): the TLS handshake fails", name, err)
	}
	return OutcomeRouted, fmt.Sprintf("the client certificate is signed by a CA of %s", name)
}

// VerifyClientCertificate checks that the first certificate of certPEM is
// valid now for client authentication under a CA of bundle (PEM).
func VerifyClientCertificate(certPEM, bundle []byte) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("the CA bundle holds no certificate")
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// admitted keeps the VirtualServices a server admits: those of a namespace
// one of its hosts entries covering the request's host names.
func admitted(vss []*networkingv1.VirtualService, gw *networkingv1.Gateway, t Taken) []*networkingv1.VirtualService {
	return slices.DeleteFunc(slices.Clone(vss), func(vs *networkingv1.VirtualService) bool {
		return !slices.ContainsFunc(t.hosts, func(entry string) bool { return admits(entry, gw.Namespace, vs.Namespace) })
	})
}
