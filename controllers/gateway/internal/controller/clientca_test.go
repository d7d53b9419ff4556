package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/gateway/internal/certs"
)

func clientCASource(name, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"ca.crt": data}}
}

func clientCACopy(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ClientCAConfigMap}, cm)).To(Succeed())
	return cm
}

func httpsTLS(t *testing.T) *networkingapi.ServerTLSSettings {
	t.Helper()
	return liveGateway(t).Spec.Servers[0].Tls
}

// TestClientCertificates walks spec.gateway.clientCertificates through the
// administrator's story: a bundle that is missing, then wrong, changes
// nothing the gateway does; a valid one is copied and required; a broken
// update keeps the CAs in force; Optional with a Secret; a Secret standing
// in for the copy; the Gateway API Gateway's frontend validation; and the
// requirement removed.
func TestClientCertificates(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(start)
	r := newReconciler(clk)
	const domain = "mtls.example.com"
	clients, err := certs.IssueCA("clients.example", start, 900*24*time.Hour)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	partners, err := certs.IssueCA("partners.example", start, 900*24*time.Hour)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	leaf, err := certs.IssueServing(clients, "clients.example", start, 24*time.Hour)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	required := func(bundle operatorv1alpha1.ClientCABundle) *operatorv1alpha1.GatewaySpec {
		return &operatorv1alpha1.GatewaySpec{Domain: domain, ClientCertificates: &operatorv1alpha1.ClientCertificates{CABundle: bundle}}
	}

	t.Run("a missing bundle is reported and the gateway asks for no certificate, whatever a tenant names alike", func(t *testing.T) {
		g := NewWithT(t)
		// A tenant's ConfigMap of the bundle's name in its own namespace.
		g.Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}})).To(Succeed())
		tenants := clientCASource("client-ca", string(partners.CertPEM))
		tenants.Namespace = "team-b"
		g.Expect(k8sClient.Create(ctx, tenants)).To(Succeed())
		setGateway(t, required(operatorv1alpha1.ClientCABundle{ConfigMapName: "client-ca"}))
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayError))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonClientCAInvalid))
		g.Expect(st.Message).To(ContainSubstring("ConfigMap istio-system/client-ca"))
		g.Expect(st.Message).To(ContainSubstring("does not exist"))
		g.Expect(st.Message).To(ContainSubstring("asks clients for no certificate until it is fixed"))
		g.Expect(st.ClientCertificates).To(BeEmpty())
		g.Expect(httpsTLS(t).Mode).To(Equal(networkingapi.ServerTLSSettings_SIMPLE))
		g.Expect(httpsTLS(t).CaCertCredentialName).To(BeEmpty())
		g.Expect(gone(&corev1.ConfigMap{}, ClientCAConfigMap)).To(BeTrue())
	})

	t.Run("a bundle with a leaf certificate is refused", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Create(ctx, clientCASource("client-ca", string(leaf.CertPEM)))).To(Succeed())
		st := reconcileOnce(t, r)
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonClientCAInvalid))
		g.Expect(st.Message).To(ContainSubstring("is not a CA certificate"))
		g.Expect(httpsTLS(t).Mode).To(Equal(networkingapi.ServerTLSSettings_SIMPLE))
		g.Expect(gone(&corev1.ConfigMap{}, ClientCAConfigMap)).To(BeTrue())
	})

	t.Run("a valid bundle is copied and client certificates are required", func(t *testing.T) {
		g := NewWithT(t)
		src := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client-ca"}, src)).To(Succeed())
		src.Data["ca.crt"] = "# the clients' CA\n" + string(clients.CertPEM)
		g.Expect(k8sClient.Update(ctx, src)).To(Succeed())
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
		g.Expect(st.ClientCertificates).To(Equal(operatorv1alpha1.ClientCertificateRequired))
		g.Expect(st.Message).To(ContainSubstring("clients must present a certificate of the CAs in ConfigMap istio-system/portico-gateway-client-ca"))
		tls := httpsTLS(t)
		g.Expect(tls.Mode).To(Equal(networkingapi.ServerTLSSettings_MUTUAL))
		g.Expect(tls.CaCertCredentialName).To(Equal("configmap://" + ns + "/" + ClientCAConfigMap))
		g.Expect(tls.CredentialName).To(Equal(SelfSignedSecret))
		cp := clientCACopy(t)
		g.Expect(cp.Data["ca.crt"]).To(Equal(string(clients.CertPEM)), "the checked certificates only")
		g.Expect(metav1.IsControlledBy(cp, apiGateway(t))).To(BeTrue())
		g.Expect(liveGateway(t).Spec.Servers[1].Tls.HttpsRedirect).To(BeTrue(), "HTTP still redirects")

		rv := cp.ResourceVersion
		reconcileOnce(t, r)
		g.Expect(clientCACopy(t).ResourceVersion).To(Equal(rv), "nothing changed: no write")
	})

	t.Run("a broken update of the bundle keeps the CAs and the requirement in force", func(t *testing.T) {
		g := NewWithT(t)
		src := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client-ca"}, src)).To(Succeed())
		src.Data["ca.crt"] = "not a certificate"
		g.Expect(k8sClient.Update(ctx, src)).To(Succeed())
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayError))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonClientCAInvalid))
		g.Expect(st.Message).To(ContainSubstring("keeps requiring client certificates (Required) of the CAs it had"))
		g.Expect(st.ClientCertificates).To(Equal(operatorv1alpha1.ClientCertificateRequired))
		g.Expect(httpsTLS(t).Mode).To(Equal(networkingapi.ServerTLSSettings_MUTUAL))
		g.Expect(clientCACopy(t).Data["ca.crt"]).To(Equal(string(clients.CertPEM)))
	})

	t.Run("a Gateway stored without caCertCredentialName (an Istio CRD before 1.28) is reported, not rewritten forever", func(t *testing.T) {
		g := NewWithT(t)
		live := liveGateway(t)
		live.Spec.Servers[0].Tls.CaCertCredentialName = "" // what an old CRD keeps of the write
		g.Expect(k8sClient.Update(ctx, live)).To(Succeed())
		rv := liveGateway(t).ResourceVersion
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: operatorv1alpha1.SingletonName}})
		g.Expect(err).To(MatchError(ContainSubstring("Istio 1.28 or later")))
		st := apiGateway(t).Status.Gateway
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayError))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonApplyFailed))
		g.Expect(st.Message).To(ContainSubstring("does not know it"))
		g.Expect(liveGateway(t).ResourceVersion).To(Equal(rv), "no write that would be dropped again")

		live = liveGateway(t)
		live.Spec.Servers[0].Tls.CaCertCredentialName = ClientCACredentialName(ns) // Istio upgraded
		g.Expect(k8sClient.Update(ctx, live)).To(Succeed())
	})

	t.Run("Optional, from a Secret: OPTIONAL_MUTUAL with the Secret's CAs", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partner-ca"},
			Data: map[string][]byte{"ca.crt": partners.CertPEM, "tls.key": partners.KeyPEM}})).To(Succeed())
		spec := required(operatorv1alpha1.ClientCABundle{SecretName: "partner-ca"})
		spec.ClientCertificates.Mode = operatorv1alpha1.ClientCertificateOptional
		setGateway(t, spec)
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
		g.Expect(st.ClientCertificates).To(Equal(operatorv1alpha1.ClientCertificateOptional))
		g.Expect(httpsTLS(t).Mode).To(Equal(networkingapi.ServerTLSSettings_OPTIONAL_MUTUAL))
		g.Expect(clientCACopy(t).Data).To(Equal(map[string]string{"ca.crt": string(partners.CertPEM)}), "never the Secret's other keys")
	})

	t.Run("a Secret named like the copy is reported and the Gateway left alone", func(t *testing.T) {
		g := NewWithT(t)
		shadow := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ClientCAConfigMap}, Data: map[string][]byte{"ca.crt": clients.CertPEM}}
		g.Expect(k8sClient.Create(ctx, shadow)).To(Succeed())
		setGateway(t, required(operatorv1alpha1.ClientCABundle{ConfigMapName: "client-ca"}))
		st := reconcileOnce(t, r)
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonObjectNotOwned))
		g.Expect(st.Message).To(ContainSubstring("Secret istio-system/portico-gateway-client-ca"))
		g.Expect(httpsTLS(t).Mode).To(Equal(networkingapi.ServerTLSSettings_OPTIONAL_MUTUAL), "not touched")
		g.Expect(k8sClient.Delete(ctx, shadow)).To(Succeed())
	})

	t.Run("Gateway API: frontend validation gateway-wide, accepted by the real CRD", func(t *testing.T) {
		g := NewWithT(t)
		src := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client-ca"}, src)).To(Succeed())
		src.Data["ca.crt"] = string(clients.CertPEM) + string(partners.CertPEM)
		g.Expect(k8sClient.Update(ctx, src)).To(Succeed())
		spec := required(operatorv1alpha1.ClientCABundle{ConfigMapName: "client-ca"})
		spec.GatewayAPI = &operatorv1alpha1.DefaultGatewayAPI{}
		setGateway(t, spec)
		st := reconcileOnce(t, r)
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayNotProgrammed), st.Message)
		g.Expect(st.ClientCertificates).To(Equal(operatorv1alpha1.ClientCertificateRequired))
		live := liveGatewayAPIGateway(t)
		g.Expect(live.Spec.TLS).NotTo(BeNil())
		v := live.Spec.TLS.Frontend.Default.Validation
		g.Expect(v.Mode).To(Equal(gwapiv1.AllowValidOnly))
		g.Expect(v.CACertificateRefs).To(Equal([]gwapiv1.ObjectReference{{Group: "", Kind: "ConfigMap", Name: ClientCAConfigMap}}))
		g.Expect(live.Spec.TLS.Frontend.PerPort).To(BeEmpty())
		g.Expect(clientCACopy(t).Data["ca.crt"]).To(Equal(string(clients.CertPEM) + string(partners.CertPEM)))
		gen := live.Generation
		reconcileOnce(t, r)
		g.Expect(liveGatewayAPIGateway(t).Generation).To(Equal(gen), "the live Gateway compares equal: no rewrite")

		spec.ClientCertificates.Mode = operatorv1alpha1.ClientCertificateOptional
		setGateway(t, spec)
		reconcileOnce(t, r)
		g.Expect(liveGatewayAPIGateway(t).Spec.TLS.Frontend.Default.Validation.Mode).To(Equal(gwapiv1.AllowInsecureFallback))
	})

	t.Run("removing the requirement removes the validation and the copy", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: domain})
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
		g.Expect(st.ClientCertificates).To(BeEmpty())
		g.Expect(httpsTLS(t).Mode).To(Equal(networkingapi.ServerTLSSettings_SIMPLE))
		g.Expect(httpsTLS(t).CaCertCredentialName).To(BeEmpty())
		g.Expect(gone(&corev1.ConfigMap{}, ClientCAConfigMap)).To(BeTrue())
		g.Expect(gone(&gwapiv1.Gateway{}, operatorv1alpha1.DefaultGatewayName)).To(BeTrue())
		for _, obj := range []client.Object{clientCASource("client-ca", ""), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partner-ca"}}} {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "the administrator's bundles are left as they were")
			g.Expect(obj.GetOwnerReferences()).To(BeEmpty())
			g.Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
		}
	})
	setGateway(t, nil)
	reconcileOnce(t, r)
	NewWithT(t).Expect(gone(&networkingv1.Gateway{}, operatorv1alpha1.DefaultGatewayName)).To(BeTrue())
}

func apiGateway(t *testing.T) *operatorv1alpha1.APIGateway {
	t.Helper()
	gw := &operatorv1alpha1.APIGateway{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
	return gw
}
