//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
)

// The default gateway of the specs below.
const (
	gatewayDomain = "portico.test"
	// defaultGatewayRef is the Istio Gateway as APIRules name it.
	defaultGatewayRef = gatewayNamespace + "/" + operatorv1alpha1.DefaultGatewayName
	ordersHost        = "orders." + gatewayDomain
	healthHost        = operatorv1alpha1.DefaultGatewayHealthHost + "." + gatewayDomain
	// selfSignedSecret and caObjects (a Secret with the CA's key and the
	// ConfigMap clients trust) are the selfSigned source's objects.
	selfSignedSecret = operatorv1alpha1.DefaultGatewayName + "-tls"
	caObjects        = operatorv1alpha1.DefaultGatewayCAConfigMap
	// ownCertSecret is the user's certificate of the secretName source.
	ownCertSecret = "own-cert"
)

// gatewayReport adds a line to e2e/_artifacts/gateway-report.txt.
func gatewayReport(format string, args ...any) {
	reportTo("gateway-report.txt", format, args...)
}

// reportTo adds a line to the report e2e/_artifacts/<name>, and to the
// spec's output.
func reportTo(name, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Fprintln(GinkgoWriter, line)
	f, err := os.OpenFile(filepath.Join(artifacts, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintln(f, line)
	Expect(f.Close()).To(Succeed())
}

// defaultGatewayStatus is status.gateway, once the gateway controller has
// observed the APIGateway's current generation.
func defaultGatewayStatus(g Gomega) operatorv1alpha1.GatewayStatus {
	gw := &operatorv1alpha1.APIGateway{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
	g.Expect(gw.Status.Gateway).NotTo(BeNil(), "status.gateway")
	g.Expect(gw.Status.Gateway.ObservedGeneration).To(Equal(gw.Generation), "status.gateway describes the current spec")
	return *gw.Status.Gateway
}

// defaultIstioGateway reads the default gateway's Istio Gateway.
func defaultIstioGateway(g Gomega) *networkingv1.Gateway {
	gw := &networkingv1.Gateway{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayName}, gw)).To(Succeed())
	return gw
}

// serverOf returns the Gateway's server for protocol (HTTPS, HTTP).
func serverOf(g Gomega, gw *networkingv1.Gateway, protocol string) *networkingapi.Server {
	for _, s := range gw.Spec.GetServers() {
		if s.GetPort().GetProtocol() == protocol {
			return s
		}
	}
	g.Expect(protocol).To(BeEmpty(), "Gateway %s has no %s server", defaultGatewayRef, protocol)
	return nil
}

// expectServing checks that the default gateway is Ready and serves the
// certificate of Secret secret: in its status and in the Istio Gateway.
func expectServing(g Gomega, secret, caConfigMap string) {
	st := defaultGatewayStatus(g)
	g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), "%s: %s", st.Reason, st.Message)
	g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayReady))
	g.Expect(st.Gateway).To(Equal(defaultGatewayRef))
	g.Expect(st.Hosts).To(Equal([]string{"*." + gatewayDomain}))
	g.Expect(st.SecretName).To(Equal(secret))
	g.Expect(st.CAConfigMap).To(Equal(caConfigMap))
	g.Expect(st.NotAfter).NotTo(BeNil())
	g.Expect(st.NotAfter.Time).To(BeTemporally(">", time.Now()))
	g.Expect(serverOf(g, defaultIstioGateway(g), "HTTPS").GetTls().GetCredentialName()).To(Equal(secret), "the Gateway's credentialName")
}

// caBundle reads the CA bundle the selfSigned source publishes.
func caBundle() []byte {
	cm := &corev1.ConfigMap{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: gatewayNamespace, Name: caObjects}, cm)).To(Succeed())
	Expect(cm.Data["ca.crt"]).To(ContainSubstring("BEGIN CERTIFICATE"))
	return []byte(cm.Data["ca.crt"])
}

// certificatesOf parses every certificate of a PEM bundle.
func certificatesOf(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			Expect(err).NotTo(HaveOccurred())
			out = append(out, cert)
		}
	}
}

// verifyChain checks, as a TLS client would, that the PEM chain (leaf
// first) is valid for host under the roots of caPEM.
func verifyChain(chainPEM, caPEM []byte, host string) error {
	chain := certificatesOf(chainPEM)
	if len(chain) == 0 {
		return fmt.Errorf("no certificate")
	}
	opts := x509.VerifyOptions{DNSName: host, Roots: x509.NewCertPool(), Intermediates: x509.NewCertPool()}
	for _, c := range certificatesOf(caPEM) {
		opts.Roots.AddCert(c)
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(opts)
	return err
}

// issueOwnCertificate makes what a user brings for the secretName source:
// a CA of their own and a certificate for *.<domain> and <domain> signed by
// it (ECDSA P-256). certPEM is the leaf followed by the CA.
func issueOwnCertificate(domain string, lifetime time.Duration) (caPEM, certPEM, keyPEM []byte) {
	now := time.Now()
	serial := func() *big.Int {
		n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		Expect(err).NotTo(HaveOccurred())
		return n
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Portico e2e own CA", Organization: []string{"Portico e2e"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	ca, err := x509.ParseCertificate(caDER)
	Expect(err).NotTo(HaveOccurred())

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "*." + domain},
		DNSNames:     []string{"*." + domain, domain},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())

	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), caPEM...)
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return caPEM, certPEM, keyPEM
}

// defaultGatewaySpecs are the story of the default gateway: the cluster
// administrator sets spec.gateway.domain in the APIGateway and the gateway
// controller runs an Istio Gateway for *.<domain> with a certificate; an
// APIRule that names no gateway is served by it over HTTPS; the
// certificate's source is switched while requests flow; disabling the
// gateway waits until no APIRule uses it. Requests go through the e2e
// agent's gateway stand-in (deployTrafficPath), which serves the Gateway's
// HTTPS server with the Secret its credentialName names, as Istio's ingress
// gateway does, from client pods that trust only the CA they are given.
//
// Call it inside the Portico Describe (an Ordered container), on a cluster
// where:
//   - the APIGateway default exists with Istio's CRDs installed, so the
//     operator runs the gateway controller (Deployment gateway-controller)
//     and the apirule controller;
//   - namespaces shop and istio-system and the orders Service (shop, port
//     8080, selector app: orders) exist, as after "turns an APIRule into
//     Istio objects"; the backend and the gateway stand-in are deployed
//     here if they are not yet (deployTrafficPath is idempotent);
//   - spec.gateway is not set, or set to anything: it is replaced.
//
// A good place is right after "routes a request from a pod through the
// APIRule's VirtualService to its Service". The specs run on the node
// target only and leave spec.gateway disabled (enabled: false) with nothing
// of the default gateway left and no object of their own (the APIRule
// shop/orders-default, Secret istio-system/own-cert and the client pods
// and their ConfigMaps are deleted). Timings go to
// e2e/_artifacts/gateway-report.txt.
func defaultGatewaySpecs() {
	var (
		// gatewayIP is the stand-in's Service: 80 for HTTP, 443 for HTTPS.
		gatewayIP string
		// ownCertVersion is the user's Secret's resourceVersion at creation.
		ownCertVersion string
	)
	rule := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "orders-default", Namespace: "shop"},
		Spec: gatewayv1alpha1.APIRuleSpec{
			// No gateway: the default gateway serves it.
			Hosts:   []gatewayv1alpha1.Hostname{ordersHost},
			Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
			// The same access as the orders APIRule's /health, so the
			// two APIRules of the workload agree.
			Rules: []gatewayv1alpha1.Rule{{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}},
		},
	}
	skipUnlessNode := func() {
		if target != framework.TargetNode {
			Skip("the default gateway specs run on the node target: it publishes the gateway controller's image and runs real pods")
		}
	}
	// https and plain are get arguments for a request through the
	// stand-in's Service, with the host in the URL (SNI and Host header).
	https := func(host, path string) []string {
		return []string{"https://" + host + path, "--connect", gatewayIP + ":443", "--ca", "/ca/ca.crt"}
	}
	plain := func(host, path string) []string {
		return []string{"http://" + host + path, "--connect", gatewayIP + ":80"}
	}

	It("runs the default gateway for *."+gatewayDomain+" with a selfSigned certificate once spec.gateway sets a domain", func(ctx SpecContext) {
		skipUnlessNode()
		gatewayIP = deployTrafficPath(ctx)

		started := time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Gateway = &operatorv1alpha1.GatewaySpec{Domain: gatewayDomain}
		})
		Eventually(func(g Gomega) {
			expectServing(g, selfSignedSecret, caObjects)
			g.Expect(controllerStatus(g, operatorv1alpha1.ControllerGateway).Phase).To(Equal(operatorv1alpha1.PhaseReady))
			g.Expect(deployment(g, "gateway-controller").Status.AvailableReplicas).To(BeNumerically(">=", 1))
		}, 2*timeout, interval).Should(Succeed())
		gatewayReport("default gateway *.%s Ready with the selfSigned certificate %s after setting spec.gateway.domain", gatewayDomain, time.Since(started).Round(100*time.Millisecond))

		By("checking the Gateway: HTTPS on 443 with the Secret, HTTP on 80 redirecting, both for *." + gatewayDomain)
		gw := defaultIstioGateway(Default)
		Expect(gw.Spec.GetSelector()).To(Equal(map[string]string{"istio": "ingressgateway"}))
		Expect(gw.Spec.GetServers()).To(HaveLen(2))
		secure := serverOf(Default, gw, "HTTPS")
		Expect(secure.GetPort().GetNumber()).To(BeEquivalentTo(443))
		Expect(secure.GetHosts()).To(Equal([]string{"*." + gatewayDomain}))
		Expect(secure.GetTls().GetMode()).To(Equal(networkingapi.ServerTLSSettings_SIMPLE))
		Expect(secure.GetTls().GetCredentialName()).To(Equal(selfSignedSecret))
		redirect := serverOf(Default, gw, "HTTP")
		Expect(redirect.GetPort().GetNumber()).To(BeEquivalentTo(80))
		Expect(redirect.GetHosts()).To(Equal([]string{"*." + gatewayDomain}))
		Expect(redirect.GetTls().GetHttpsRedirect()).To(BeTrue())

		By("checking the health VirtualService: 200 ok at " + healthHost + operatorv1alpha1.DefaultGatewayHealthPath)
		health := &networkingv1.VirtualService{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayName + "-health"}, health)).To(Succeed())
		Expect(health.Spec.GetHosts()).To(Equal([]string{healthHost}))
		Expect(health.Spec.GetGateways()).To(Equal([]string{defaultGatewayRef}))
		Expect(health.Spec.GetHttp()).To(HaveLen(1))
		Expect(health.Spec.GetHttp()[0].GetMatch()[0].GetUri().GetExact()).To(Equal(operatorv1alpha1.DefaultGatewayHealthPath))
		Expect(health.Spec.GetHttp()[0].GetDirectResponse().GetStatus()).To(BeEquivalentTo(200))
		Expect(health.Spec.GetHttp()[0].GetDirectResponse().GetBody().GetString_()).To(Equal("ok\n"))

		By("checking that the serving certificate chains to the published CA for any name under " + gatewayDomain)
		tlsSecret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: selfSignedSecret}, tlsSecret)).To(Succeed())
		Expect(tlsSecret.Type).To(Equal(corev1.SecretTypeTLS))
		Expect(tlsSecret.Data).To(HaveKey(corev1.TLSCertKey))
		Expect(tlsSecret.Data).To(HaveKey(corev1.TLSPrivateKeyKey))
		Expect(tlsSecret.Data).To(HaveKey("ca.crt"))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: caObjects}, &corev1.Secret{})).To(Succeed(), "the CA's Secret")
		Expect(verifyChain(tlsSecret.Data[corev1.TLSCertKey], caBundle(), ordersHost)).To(Succeed())
	})

	It("serves an APIRule that names no gateway over HTTPS with the published CA, redirects HTTP to HTTPS and answers its health check", func(ctx SpecContext) {
		skipUnlessNode()
		trustConfigMap(ctx, "gateway-ca", caBundle())

		started := time.Now()
		Expect(k8sClient.Create(ctx, rule.DeepCopy())).To(Succeed())
		Eventually(func(g Gomega) {
			r := &gatewayv1alpha1.APIRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), r)).To(Succeed())
			ready := apimeta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
			vs := &networkingv1.VirtualService{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), vs)).To(Succeed())
			g.Expect(vs.Spec.GetHosts()).To(Equal([]string{ordersHost}))
			g.Expect(vs.Spec.GetGateways()).To(Equal([]string{defaultGatewayRef}), "the APIRule uses the default gateway")
		}, timeout, interval).Should(Succeed())
		applied := time.Since(started)

		By("sending requests from client pods that trust only the published CA")
		answers := requestTrusting(ctx, "gateway-ca", map[string][]string{
			// HTTPS through the Gateway's certificate to the backend.
			"gw-https": append(https(ordersHost, "/health"), "--expect-status", "200", "--expect-body", "orders GET /health"),
			// HTTP is redirected to the same URL over HTTPS.
			"gw-redirect": append(plain(ordersHost, "/health"), "--no-follow", "--expect-status", "301",
				"--expect-header", "Location=https://"+ordersHost+"/health"),
			// The gateway's own health check.
			"gw-healthz": append(https(healthHost, operatorv1alpha1.DefaultGatewayHealthPath), "--expect-status", "200", "--expect-body", "ok"),
		})
		Expect(answers["gw-https"]).To(ContainSubstring("200 orders GET /health"))
		Expect(answers["gw-redirect"]).To(ContainSubstring("Location: https://" + ordersHost + "/health"))
		Expect(answers["gw-healthz"]).To(HavePrefix("200 ok"))
		gatewayReport("APIRule %s on the default gateway: applied %s, answering over HTTPS (and redirecting HTTP) from client pods %s after its creation",
			client.ObjectKeyFromObject(rule), applied.Round(100*time.Millisecond), time.Since(started).Round(100*time.Millisecond))
	})

	It("requires client certificates of the administrator's CA once spec.gateway.clientCertificates is set, and stops once it is removed", func(ctx SpecContext) {
		skipUnlessNode()
		expectClientCertificates(ctx, https) // clientcerts_test.go
	})

	It("switches to the user's certificate (secretName) and back to selfSigned while a client keeps requesting", func(ctx SpecContext) {
		skipUnlessNode()
		selfSignedCA := caBundle()
		ownCA, ownCert, ownKey := issueOwnCertificate(gatewayDomain, 90*24*time.Hour)
		own := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ownCertSecret, Namespace: gatewayNamespace},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: ownCert, corev1.TLSPrivateKeyKey: ownKey},
		}
		Expect(k8sClient.Create(ctx, own)).To(Succeed())
		ownCertVersion = own.ResourceVersion
		trustConfigMap(ctx, "gateway-ca-both", selfSignedCA, ownCA)
		trustConfigMap(ctx, "gateway-ca-own", ownCA)

		By("sending requests in a loop from a pod that trusts both the selfSigned CA and the user's")
		traffic := startTrafficFromPod(ctx, "gw-traffic", "gateway-ca-both",
			append(https(ordersHost, "/health"), "--expect-status", "200", "--expect-body", "orders GET /health", "--interval", "50ms", "--timeout", "30m")...)
		var before trafficTally
		Eventually(func(g Gomega) {
			before = traffic.Tally(g)
			g.Expect(before.OK).To(BeNumerically(">=", 5))
		}, timeout, interval).Should(Succeed())

		By("switching spec.gateway.certificate to secretName " + ownCertSecret)
		started := time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Gateway.Certificate = &operatorv1alpha1.GatewayCertificate{SecretName: ownCertSecret}
		})
		Eventually(func(g Gomega) { expectServing(g, ownCertSecret, "") }, timeout, interval).Should(Succeed())
		statusTook := time.Since(started)
		By("requesting from a pod that trusts only the user's CA: the stand-in serves the new Secret")
		requestTrusting(ctx, "gateway-ca-own", map[string][]string{
			"gw-own-cert": append(https(ordersHost, "/health"), "--expect-status", "200", "--expect-body", "orders GET /health"),
		})
		servedTook := time.Since(started)
		var served trafficTally
		Eventually(func(g Gomega) { served = traffic.Tally(g) }, timeout, interval).Should(Succeed())
		// The tally covers the switch and 5 requests after the new
		// certificate served (however long a loaded node takes to send them).
		toOwn := traffic.Await(before, served, 5)
		during := served.Since(before)
		gatewayReport("selfSigned -> secretName %s: status Ready on it after %s, served (a client trusting only its CA answered) after %s; requests during the switch: %d answered, %d failed %v; with those after it: %d answered, %d failed %v (last: %v)",
			ownCertSecret, statusTook.Round(100*time.Millisecond), servedTook.Round(100*time.Millisecond), during.OK, during.Failed, during.Errors, toOwn.OK, toOwn.Failed, toOwn.Errors, toOwn.Last)
		Expect(during.OK).To(BeNumerically(">", 0), "the client kept requesting while the certificate moved")
		Expect(toOwn.Failed).To(BeZero(), "requests failed while the certificate moved to %s: %v, last: %v", ownCertSecret, toOwn.Errors, toOwn.Last)

		By("switching spec.gateway.certificate back to selfSigned")
		Eventually(func(g Gomega) { before = traffic.Tally(g) }, timeout, interval).Should(Succeed())
		started = time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Gateway.Certificate = &operatorv1alpha1.GatewayCertificate{SelfSigned: &operatorv1alpha1.SelfSignedCertificate{}}
		})
		Eventually(func(g Gomega) { expectServing(g, selfSignedSecret, caObjects) }, timeout, interval).Should(Succeed())
		statusTook = time.Since(started)
		newCA := caBundle()
		trustConfigMap(ctx, "gateway-ca-again", newCA)
		By("requesting from a pod that trusts only the CA published now")
		requestTrusting(ctx, "gateway-ca-again", map[string][]string{
			"gw-selfsigned-again": append(https(ordersHost, "/health"), "--expect-status", "200", "--expect-body", "orders GET /health"),
			"gw-healthz-again":    append(https(healthHost, operatorv1alpha1.DefaultGatewayHealthPath), "--expect-status", "200", "--expect-body", "ok"),
		})
		servedTook = time.Since(started)
		Eventually(func(g Gomega) { served = traffic.Tally(g) }, timeout, interval).Should(Succeed())
		back := traffic.Await(before, served, 5)
		// The serving certificate is signed by the first CA of the bundle.
		// If it is the CA of before, the looping client trusts it still;
		// a new CA (the selfSigned source's were removed while the user's
		// certificate served) is one no client could trust beforehand.
		sameCA := false
		for _, old := range certificatesOf(selfSignedCA) {
			sameCA = sameCA || bytes.Equal(old.Raw, certificatesOf(newCA)[0].Raw)
		}
		gatewayReport("secretName %s -> selfSigned: status Ready on it after %s, served (a client trusting the CA published now answered) after %s; same CA as before: %t; requests of the client trusting the CAs of before during the switch: %d answered, %d failed %v (last: %v)",
			ownCertSecret, statusTook.Round(100*time.Millisecond), servedTook.Round(100*time.Millisecond), sameCA, back.OK, back.Failed, back.Errors, back.Last)
		if sameCA {
			Expect(back.Failed).To(BeZero(), "requests failed while the certificate moved back to selfSigned: %v, last: %v", back.Errors, back.Last)
		} else {
			Expect(back.Failed).To(Equal(back.Errors["unknown-authority"]),
				"the only failures allowed are of the client not trusting the new CA: the gateway always presented a certificate and routed: %v, last: %v", back.Errors, back.Last)
		}
	})

	It("warns of a secretName certificate that expires within 14 days (status and PorticoGatewayCertificateExpiring), and stops once selfSigned serves again", func(ctx SpecContext) {
		skipUnlessNode()
		By("replacing the user's certificate in " + ownCertSecret + " with one that expires in 10 days")
		_, shortCert, shortKey := issueOwnCertificate(gatewayDomain, 10*24*time.Hour)
		own := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: ownCertSecret}, own)).To(Succeed())
		own.Data = map[string][]byte{corev1.TLSCertKey: shortCert, corev1.TLSPrivateKeyKey: shortKey}
		Expect(k8sClient.Update(ctx, own)).To(Succeed())
		ownCertVersion = own.ResourceVersion

		faultAt := time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Gateway.Certificate = &operatorv1alpha1.GatewayCertificate{SecretName: ownCertSecret}
		})
		Eventually(func(g Gomega) {
			st := defaultGatewayStatus(g)
			g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayWarning), "%s: %s", st.Reason, st.Message)
			g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonCertificateExpiring))
			g.Expect(st.SecretName).To(Equal(ownCertSecret), "a certificate that expires in 10 days still serves")
		}, timeout, interval).Should(Succeed())
		expiring := map[string]string{"namespace": namespace}
		fired := alertFires("PorticoGatewayCertificateExpiring", expiring, faultAt)

		By("switching back to selfSigned, which Portico renews")
		fixAt := time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Gateway.Certificate = &operatorv1alpha1.GatewayCertificate{SelfSigned: &operatorv1alpha1.SelfSignedCertificate{}}
		})
		Eventually(func(g Gomega) { expectServing(g, selfSignedSecret, caObjects) }, timeout, interval).Should(Succeed())
		alertResolves("PorticoGatewayCertificateExpiring", expiring, "a secretName certificate that expires in 10 days", fired, fixAt)
	})

	It("keeps the default gateway after spec.gateway.enabled is set to false while an APIRule uses it, and removes all of it once none does", func(ctx SpecContext) {
		skipUnlessNode()
		started := time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) { gw.Spec.Gateway.Enabled = ptr.To(false) })
		Eventually(func(g Gomega) {
			st := defaultGatewayStatus(g)
			g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayWarning), "%s: %s", st.Reason, st.Message)
			g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayInUse))
			g.Expect(st.Message).To(ContainSubstring(client.ObjectKeyFromObject(rule).String()))
			g.Expect(st.Gateway).To(Equal(defaultGatewayRef))
		}, timeout, interval).Should(Succeed())
		warned := time.Since(started)
		Consistently(func(g Gomega) {
			defaultIstioGateway(g)
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayName + "-health"}, &networkingv1.VirtualService{})).To(Succeed())
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: selfSignedSecret}, &corev1.Secret{})).To(Succeed())
		}, 3*time.Second, interval).Should(Succeed(), "the Gateway stays while an APIRule uses it")

		By("deleting the APIRule, the last user")
		started = time.Now()
		Expect(k8sClient.Delete(ctx, rule.DeepCopy())).To(Succeed())
		Eventually(isGone(rule.DeepCopy()), timeout, interval).Should(BeTrue())
		gone := []client.Object{
			&networkingv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayName}},
			&networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: operatorv1alpha1.DefaultGatewayName + "-health"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: selfSignedSecret}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: caObjects}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: caObjects}},
		}
		for _, obj := range gone {
			Eventually(isGone(obj), timeout, interval).Should(BeTrue(), "%T %s is removed", obj, client.ObjectKeyFromObject(obj))
		}
		Eventually(func(g Gomega) {
			st := defaultGatewayStatus(g)
			g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayDisabled), "%s: %s", st.Reason, st.Message)
			g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonNotConfigured))
		}, timeout, interval).Should(Succeed())
		gatewayReport("disabled while in use: Warning %s after setting enabled: false; everything removed and Disabled %s after deleting the last APIRule",
			warned.Round(100*time.Millisecond), time.Since(started).Round(100*time.Millisecond))

		By("leaving the user's Secret as it was")
		own := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: gatewayNamespace, Name: ownCertSecret}, own)).To(Succeed())
		Expect(own.ResourceVersion).To(Equal(ownCertVersion), "Portico never modifies a secretName Secret")
		Expect(k8sClient.Delete(ctx, own)).To(Succeed())
	})
}
