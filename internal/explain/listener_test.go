package explain

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// authority is a test CA that signs client certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t *testing.T, name string) authority {
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
	return authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (a authority) client(t *testing.T) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// publicGateway is istio-system/public: HTTP on 80 for every host, HTTP on
// 80 for secure.example redirecting to HTTPS, and HTTPS on 443 for
// team-a's *.a.example hosts only, MUTUAL with the client CA bundle
// client-ca.
func publicGateway() *networkingv1.Gateway {
	return &networkingv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "public"}, Spec: networkingv1alpha3.Gateway{
		Servers: []*networkingv1alpha3.Server{
			{Port: &networkingv1alpha3.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"}},
			{Port: &networkingv1alpha3.Port{Number: 80, Name: "http-secure", Protocol: "HTTP"}, Hosts: []string{"secure.example"},
				Tls: &networkingv1alpha3.ServerTLSSettings{HttpsRedirect: true}},
			{Port: &networkingv1alpha3.Port{Number: 443, Name: "https", Protocol: "HTTPS"}, Hosts: []string{"team-a/*.a.example"},
				Tls: &networkingv1alpha3.ServerTLSSettings{Mode: networkingv1alpha3.ServerTLSSettings_MUTUAL, CredentialName: "public-cert", CaCertCredentialName: "client-ca"}},
		},
	}}
}

// optional makes the HTTPS server of the world's Gateway OPTIONAL_MUTUAL.
func optional(w World) World {
	gw := w.IstioGateways[0].DeepCopy()
	gw.Spec.Servers[2].Tls.Mode = networkingv1alpha3.ServerTLSSettings_OPTIONAL_MUTUAL
	w.IstioGateways = []*networkingv1.Gateway{gw}
	return w
}

func TestTheListenerStep(t *testing.T) {
	clients, others := newAuthority(t, "clients"), newAuthority(t, "others")
	world := func(visible bool) World {
		w := ledgerWorld()
		w.Policies = Policies{}
		w.VirtualServices = append(w.VirtualServices, virtualService("team-b", "squat", 0, []string{"istio-system/public"}, []string{"squat.a.example"},
			httpRoute("squat", "/", "ledger.team-a.svc.cluster.local")))
		if visible {
			w.IstioGateways = []*networkingv1.Gateway{publicGateway()}
			w.ClientCAs = map[string][]byte{"client-ca": clients.pem}
		}
		return w
	}
	cases := []struct {
		name             string
		world            World
		query            Query
		want             Outcome
		listener, reason string
	}{
		{"plain HTTP on port 80", world(true), Query{Host: "ledger.a.example", Path: "/health"}, OutcomeRouted,
			"server http of Gateway istio-system/public: port 80, HTTP, hosts *", ""},
		{"a port no server takes", world(true), Query{Host: "ledger.a.example", Path: "/health", Port: 8443}, OutcomeRefused,
			"", "no server of Gateway istio-system/public takes http on port 8443: the connection is refused"},
		{"the more specific server of a port redirects to HTTPS", world(true), Query{Host: "secure.example", Path: "/x"}, OutcomeRouted,
			"server http-secure", "301 to https://secure.example"},
		{"HTTPS without the client certificate MUTUAL requires", world(true), Query{Host: "ledger.a.example", Path: "/health", TLS: true}, OutcomeRefused,
			"TLS MUTUAL with credential public-cert, client certificates of client-ca required", "presents none"},
		{"HTTPS with a certificate of another CA", world(true), Query{Host: "ledger.a.example", Path: "/health", TLS: true, ClientCert: others.client(t)}, OutcomeRefused,
			"", "the client certificate is not one of client-ca"},
		{"HTTPS with a certificate of the client CA", world(true), Query{Host: "ledger.a.example", Path: "/health", TLS: true, ClientCert: clients.client(t)}, OutcomeRouted,
			"the client certificate is signed by a CA of client-ca", ""},
		{"OPTIONAL_MUTUAL without a certificate", optional(world(true)), Query{Host: "ledger.a.example", Path: "/health", TLS: true}, OutcomeRouted,
			"checked when presented", ""},
		{"OPTIONAL_MUTUAL with a certificate of another CA", optional(world(true)), Query{Host: "ledger.a.example", Path: "/health", TLS: true, ClientCert: others.client(t)}, OutcomeRefused,
			"", "the client certificate is not one of client-ca"},
		{"a TLS host no server covers", world(true), Query{Host: "shop.b.example", Path: "/", TLS: true}, OutcomeRefused, "", "the TLS handshake fails"},
		{"a server's namespace-scoped hosts admit that namespace's VirtualServices only", world(true),
			Query{Host: "squat.a.example", Path: "/", TLS: true, ClientCert: clients.client(t)}, Outcome404, "", "no route of the gateway"},
		{"over HTTP, the server of every host admits it", world(true), Query{Host: "squat.a.example", Path: "/"}, OutcomeRouted, "", ""},
		{"a Gateway the caller may not read is said, and routing goes on", world(false), Query{Host: "ledger.a.example", Path: "/health"}, OutcomeRouted,
			"Gateway istio-system/public is not visible to you", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			c.query.Method = "GET"
			e, err := Explain(c.world, c.query)
			g.Expect(err).NotTo(HaveOccurred())
			out := stepsText(e)
			g.Expect(e.Outcome).To(Equal(c.want), out)
			g.Expect(out).To(ContainSubstring("\nlistener "))
			g.Expect(out).To(ContainSubstring(c.listener))
			g.Expect(e.Reason).To(ContainSubstring(c.reason))
		})
	}
}
