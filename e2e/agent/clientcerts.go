package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net/http"
	"strings"

	networkingapi "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Client certificates, as Istio's ingress gateway asks for them: an HTTPS
// server of tls.mode MUTUAL requires a client certificate that chains to its
// client CAs, OPTIONAL_MUTUAL verifies one if the client presents it. The
// client CAs are, in Istio's order: the Secret or ConfigMap that
// tls.caCertCredentialName names (it takes precedence); else the Secret
// <credentialName>-cacert; else the credential Secret itself; keys cacert or
// ca.crt (a ConfigMap: ca.crt), all in the Gateway's namespace. A mutual
// server whose CAs cannot be read fails every handshake, as Envoy serves no
// listener whose validation context is missing.

// clientAuthOf returns how an HTTPS server of tls settings s treats client
// certificates, and whether the stand-in supports its mode.
func clientAuthOf(s *networkingapi.ServerTLSSettings) (tls.ClientAuthType, bool) {
	switch s.GetMode() {
	case networkingapi.ServerTLSSettings_SIMPLE:
		return tls.NoClientCert, true
	case networkingapi.ServerTLSSettings_MUTUAL:
		return tls.RequireAndVerifyClientCert, true
	case networkingapi.ServerTLSSettings_OPTIONAL_MUTUAL:
		return tls.VerifyClientCertIfGiven, true
	}
	return tls.NoClientCert, false
}

// loadClientCAs reads the client CAs of an HTTPS server in namespace ns;
// nil (and a log line saying why) when there are none.
func (rt *router) loadClientCAs(ctx context.Context, ns string, s *networkingapi.ServerTLSSettings) (*x509.CertPool, string) {
	var candidates []client.Object
	if name := s.GetCaCertCredentialName(); name != "" {
		candidates = []client.Object{
			&corev1.Secret{}, &corev1.ConfigMap{},
		}
		for _, c := range candidates {
			c.SetNamespace(ns)
			c.SetName(name)
		}
	} else {
		for _, name := range []string{s.GetCredentialName() + "-cacert", s.GetCredentialName()} {
			sec := &corev1.Secret{}
			sec.SetNamespace(ns)
			sec.SetName(name)
			candidates = append(candidates, sec)
		}
	}
	var tried []string
	for _, obj := range candidates {
		kind := "Secret"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			kind = "ConfigMap"
		}
		ref := fmt.Sprintf("%s %s/%s", kind, ns, obj.GetName())
		if err := rt.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", ref, err))
			continue
		}
		var bundle []byte
		switch o := obj.(type) {
		case *corev1.Secret:
			bundle = o.Data["cacert"]
			if len(bundle) == 0 {
				bundle = o.Data["ca.crt"]
			}
		case *corev1.ConfigMap:
			bundle = []byte(o.Data["ca.crt"])
		}
		if len(bundle) == 0 {
			tried = append(tried, ref+": no key cacert or ca.crt")
			continue
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			log.Printf("refresh: %s holds no PEM certificate; its server verifies no client", ref)
			return nil, ref + " (no certificate)"
		}
		return pool, ref
	}
	log.Printf("refresh: no client CAs: %s; its server verifies no client", strings.Join(tried, "; "))
	return nil, "none"
}

// configForClient is the TLS listener's per-handshake configuration: the
// certificate of the server the SNI picks, and that server's client
// certificate requirement.
func (rt *router) configForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	s, err := rt.pick(hello)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*s.cert}, ClientAuth: s.clientAuth}
	if s.clientAuth != tls.NoClientCert {
		if s.clientCAs == nil {
			return nil, fmt.Errorf("the HTTPS server of %s for SNI %q has no client CAs", s.gateway, hello.ServerName)
		}
		cfg.ClientCAs = s.clientCAs
	}
	return cfg, nil
}

// presentCertificate makes c present the client certificate of certFile
// and keyFile to every server that asks for one (none when both are
// empty).
func presentCertificate(c *http.Client, certFile, keyFile string) error {
	if certFile == "" && keyFile == "" {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("client certificate: %w", err)
	}
	transport, ok := c.Transport.(*http.Transport)
	if !ok {
		return fmt.Errorf("client certificate: unexpected transport %T", c.Transport)
	}
	if transport.TLSClientConfig == nil {
		transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// Always presented, as curl --cert does: Go's default would withhold a
	// certificate whose issuer is not among the CAs the server names, and a
	// server's check of a foreign certificate would go untested.
	transport.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	return nil
}
