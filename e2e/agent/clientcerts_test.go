package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// pki is a CA and the certificates it signs, as PEM.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return pki{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf of ca for dns (a server) or for a client (dns "").
func (ca pki) issue(t *testing.T, dns string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if dns != "" {
		tmpl.Subject.CommonName, tmpl.DNSNames, tmpl.ExtKeyUsage = dns, []string{dns}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func writeFiles(t *testing.T, certPEM, keyPEM []byte) (string, string) {
	t.Helper()
	dir := t.TempDir()
	c, k := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(c, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c, k
}

// The stand-in asks for client certificates as the Gateway's tls.mode
// says, with the CAs Istio would read, and the get client presents one.
func TestClientCertificates(t *testing.T) {
	serverCA, clients, others := newCA(t, "server CA"), newCA(t, "clients CA"), newCA(t, "other CA")
	servingCert, servingKey := serverCA.issue(t, "orders.example.com")
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = networkingv1.AddToScheme(scheme)
	gateway := func(tlsSettings *networkingapi.ServerTLSSettings) *networkingv1.Gateway {
		return &networkingv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "gw"}, Spec: networkingapi.Gateway{
			Servers: []*networkingapi.Server{{Port: &networkingapi.Port{Number: 443, Name: "https", Protocol: "HTTPS"}, Hosts: []string{"*.example.com"}, Tls: tlsSettings}},
		}}
	}
	credential := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "tls"},
		Data: map[string][]byte{"tls.crt": servingCert, "tls.key": servingKey, "ca.crt": serverCA.pem}}
	clientCAs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "client-ca"}, Data: map[string]string{"ca.crt": string(clients.pem)}}
	clientCert, clientKey := clients.issue(t, "")
	otherCert, otherKey := others.issue(t, "")
	clientCertFile, clientKeyFile := writeFiles(t, clientCert, clientKey)
	otherCertFile, otherKeyFile := writeFiles(t, otherCert, otherKey)
	withClients := func(c *http.Client) *http.Client {
		if err := presentCertificate(c, clientCertFile, clientKeyFile); err != nil {
			t.Fatal(err)
		}
		return c
	}
	withOthers := func(c *http.Client) *http.Client {
		if err := presentCertificate(c, otherCertFile, otherKeyFile); err != nil {
			t.Fatal(err)
		}
		return c
	}
	none := func(c *http.Client) *http.Client { return c }

	mutual := &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_MUTUAL, CredentialName: "tls", CaCertCredentialName: "client-ca"}
	optional := &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_OPTIONAL_MUTUAL, CredentialName: "tls", CaCertCredentialName: "client-ca"}
	missing := &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_MUTUAL, CredentialName: "tls", CaCertCredentialName: "absent"}
	fallback := &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_MUTUAL, CredentialName: "tls"}
	simple := &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_SIMPLE, CredentialName: "tls"}
	cases := []struct {
		name     string
		tls      *networkingapi.ServerTLSSettings
		client   func(*http.Client) *http.Client
		wantKind string // "" is an answer
	}{
		{"SIMPLE asks for no certificate", simple, none, ""},
		{"MUTUAL: no certificate fails the handshake", mutual, none, "tls"},
		{"MUTUAL: a certificate of the client CA is served", mutual, withClients, ""},
		{"MUTUAL: a certificate of another CA fails", mutual, withOthers, "tls"},
		{"OPTIONAL_MUTUAL: no certificate is served", optional, none, ""},
		{"OPTIONAL_MUTUAL: a certificate of the client CA is served", optional, withClients, ""},
		{"OPTIONAL_MUTUAL: a certificate of another CA fails", optional, withOthers, "tls"},
		{"MUTUAL with client CAs that cannot be read fails every handshake", missing, withClients, "tls"},
		{"MUTUAL without caCertCredentialName trusts the credential's ca.crt, as Istio", fallback, withClients, "tls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(gateway(tc.tls), credential.DeepCopy(), clientCAs.DeepCopy()).Build()
			rt := &router{client: c, gateways: []string{"istio-system/gw"}, certs: map[string]cachedCert{}}
			rt.globals.Store(&[]globalFilter{})
			rt.snap.Store(&snapshot{})
			rt.refresh(context.Background())
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
			srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: rt.certificate, GetConfigForClient: rt.configForClient}
			srv.StartTLS()
			defer srv.Close()
			caFile, _ := writeFiles(t, serverCA.pem, nil)
			hc, err := httpClient(caFile, strings.TrimPrefix(srv.URL, "https://"), true)
			if err != nil {
				t.Fatal(err)
			}
			status, _, _, err := request(context.Background(), tc.client(hc), http.MethodGet, "https://orders.example.com/", "", nil)
			switch {
			case tc.wantKind == "" && (err != nil || status != http.StatusOK):
				t.Fatalf("want an answer, got %d %v", status, err)
			case tc.wantKind != "" && err == nil:
				t.Fatalf("want a %s error, got %d", tc.wantKind, status)
			case tc.wantKind != "" && errorKind(err) != tc.wantKind:
				t.Fatalf("want a %s error, got %s: %v", tc.wantKind, errorKind(err), err)
			}
		})
	}
}
