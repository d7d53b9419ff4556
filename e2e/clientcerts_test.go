//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// clientCAConfigMap is the administrator's client CA bundle in the
// gateway's namespace; the chart lets the gateway controller read it
// (controllers.gateway.configMapNames, installRelease).
const clientCAConfigMap = "portico-e2e-client-ca"

// clientAuthority is a CA that signs client certificates, made in the test
// with crypto/x509: ECDSA P-256, valid for a day.
type clientAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newClientAuthority(name string) clientAuthority {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"Portico e2e"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return clientAuthority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issueClient returns a client certificate (clientAuth, a SPIFFE-style URI
// SAN) signed by the CA, and its key, as PEM.
func (ca clientAuthority) issueClient(name string) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, &key.PublicKey, ca.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// clientKeyConfigMap writes ConfigMap shop/name for clientPod to mount at
// /ca: ca.crt (the gateway's CA to trust), client.crt and client.key (a
// test key, never a real one). It is deleted after the spec.
func clientKeyConfigMap(ctx context.Context, name string, gatewayCA, certPEM, keyPEM []byte) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Data: map[string]string{
		"ca.crt": string(gatewayCA), "client.crt": string(certPEM), "client.key": string(keyPEM),
	}}
	Expect(k8sClient.Create(ctx, cm)).To(Succeed(), "ConfigMap shop/%s", name)
	DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, cm) })
}

// presenting are the get flags that present the mounted client certificate.
var presenting = []string{"--cert", "/ca/client.crt", "--key", "/ca/client.key"}

// expectClientCertificates is the client-certificate story of the default
// gateway (issue 43): the administrator requires client certificates of
// its CA (spec.gateway.clientCertificates); a request without a
// certificate, and one with a certificate of another CA, fail the TLS
// handshake, on every host of the gateway; one with a certificate of the CA
// is served; removing the requirement serves requests without a
// certificate again and removes Portico's copy of the bundle. https builds
// the get arguments of a request through the stand-in to host and path.
// The gateway must serve the selfSigned certificate and the APIRule
// shop/orders-default (GET /health) when it starts.
func expectClientCertificates(ctx context.Context, https func(host, path string) []string) {
	gatewayCA := caBundle()
	clients, others := newClientAuthority("Portico e2e client CA"), newClientAuthority("Portico e2e other CA")
	clientCert, clientKey := clients.issueClient("orders-client")
	otherCert, otherKey := others.issueClient("intruder")
	clientKeyConfigMap(ctx, "mtls-client", gatewayCA, clientCert, clientKey)
	clientKeyConfigMap(ctx, "mtls-other", gatewayCA, otherCert, otherKey)
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: clientCAConfigMap, Namespace: gatewayNamespace},
		Data: map[string]string{"ca.crt": string(clients.pem)}}
	Expect(k8sClient.Create(ctx, bundle)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, bundle) })

	By("requiring client certificates of the client CA (spec.gateway.clientCertificates)")
	started := time.Now()
	updateGateway(func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.Gateway.ClientCertificates = &operatorv1alpha1.ClientCertificates{
			CABundle: operatorv1alpha1.ClientCABundle{ConfigMapName: clientCAConfigMap},
		}
	})
	Eventually(func(g Gomega) {
		expectServing(g, selfSignedSecret, caObjects)
		g.Expect(defaultGatewayStatus(g).ClientCertificates).To(Equal(operatorv1alpha1.ClientCertificateRequired))
		tls := serverOf(g, defaultIstioGateway(g), "HTTPS").GetTls()
		g.Expect(tls.GetMode()).To(Equal(networkingapi.ServerTLSSettings_MUTUAL))
		// Istio serves a ConfigMap's CAs only under configmap://NS/NAME.
		g.Expect(tls.GetCaCertCredentialName()).To(Equal("configmap://" + gatewayNamespace + "/" + operatorv1alpha1.DefaultGatewayClientCAConfigMap))
		cp := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap}, cp)).To(Succeed())
		g.Expect(cp.Data["ca.crt"]).To(Equal(string(clients.pem)))
	}, timeout, interval).Should(Succeed())
	statusTook := time.Since(started)

	By("requesting without a certificate, and with one of another CA: the handshake fails")
	refused := requestTrusting(ctx, "mtls-other", map[string][]string{
		"mtls-none":         append(https(ordersHost, "/health"), "--expect-error", "tls"),
		"mtls-healthz-none": append(https(healthHost, operatorv1alpha1.DefaultGatewayHealthPath), "--expect-error", "tls"),
		"mtls-other-ca":     append(append(https(ordersHost, "/health"), presenting...), "--expect-error", "tls"),
	})
	refusedTook := time.Since(started)
	for name, out := range refused {
		Expect(out).To(HavePrefix("error tls:"), name)
	}
	By("requesting with a certificate of the client CA: served")
	served := requestTrusting(ctx, "mtls-client", map[string][]string{
		"mtls-client":         append(append(https(ordersHost, "/health"), presenting...), "--expect-status", "200", "--expect-body", "orders GET /health"),
		"mtls-healthz-client": append(append(https(healthHost, operatorv1alpha1.DefaultGatewayHealthPath), presenting...), "--expect-status", "200", "--expect-body", "ok"),
	})
	Expect(served["mtls-client"]).To(ContainSubstring("200 orders GET /health"))
	gatewayReport("client certificates required: status Ready with Required after %s; 3 requests refused in the handshake (no certificate to %s and %s, another CA's to %s: %q, %q, %q) after %s; 2 with the client CA's certificate answered 200 (%s, %s)",
		statusTook.Round(100*time.Millisecond), ordersHost, healthHost, ordersHost, firstLine(refused["mtls-none"]), firstLine(refused["mtls-healthz-none"]), firstLine(refused["mtls-other-ca"]),
		refusedTook.Round(100*time.Millisecond), ordersHost, healthHost)

	By("removing the requirement: requests without a certificate are served again and the copy goes")
	started = time.Now()
	updateGateway(func(gw *operatorv1alpha1.APIGateway) { gw.Spec.Gateway.ClientCertificates = nil })
	Eventually(func(g Gomega) {
		expectServing(g, selfSignedSecret, caObjects)
		g.Expect(defaultGatewayStatus(g).ClientCertificates).To(BeEmpty())
		g.Expect(serverOf(g, defaultIstioGateway(g), "HTTPS").GetTls().GetMode()).To(Equal(networkingapi.ServerTLSSettings_SIMPLE))
	}, timeout, interval).Should(Succeed())
	Eventually(isGone(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap}}),
		timeout, interval).Should(BeTrue())
	again := requestTrusting(ctx, "mtls-client", map[string][]string{
		"mtls-none-again": append(https(ordersHost, "/health"), "--expect-status", "200", "--expect-body", "orders GET /health"),
	})
	Expect(again["mtls-none-again"]).To(ContainSubstring("200 orders GET /health"))
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(bundle), &corev1.ConfigMap{})).To(Succeed(), "the administrator's bundle is left alone")
	gatewayReport("client certificates removed: a request without a certificate answered 200 after %s; Portico's copy of the bundle removed",
		time.Since(started).Round(100*time.Millisecond))
}

// firstLine is the first line of a client pod's output.
func firstLine(out string) string {
	for i, c := range out {
		if c == '\n' {
			return out[:i]
		}
	}
	return out
}
