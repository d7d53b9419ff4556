package controller

import (
	"context"
	"os"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/gateway/internal/certs"
	"github.com/portico-dev/portico/test/testenv"
)

const ns = "istio-system"

var (
	k8sClient client.Client
	// env is the suite's control plane.
	env *testenv.Env
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		Istio:       true,
		CertManager: true,
		GatewayAPI:  true,
		// The gateway controller's types (controllers/gateway/main.go).
		AddToScheme: []func(*runtime.Scheme) error{porticov1alpha1.AddToScheme, networkingv1.AddToScheme, cmv1.AddToScheme, gwapiv1.Install},
		Namespaces:  []string{ns},
		Setup: func(_ context.Context, e *testenv.Env) error {
			k8sClient, env = e.Client, e
			return nil
		},
	}))
}

// start is the time the tests' clock starts at.
var start = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func newReconciler(clk *clocktesting.FakeClock) *Reconciler {
	return &Reconciler{Client: k8sClient, Reader: k8sClient, Clock: clk, CertManager: true, APIRules: true, GatewayAPI: true}
}

func reconcileOnce(t *testing.T, r *Reconciler) operatorv1alpha1.GatewayStatus {
	t.Helper()
	g := NewWithT(t)
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: operatorv1alpha1.SingletonName}})
	g.Expect(err).NotTo(HaveOccurred())
	gw := &operatorv1alpha1.APIGateway{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
	g.Expect(gw.Status.Gateway).NotTo(BeNil())
	return *gw.Status.Gateway
}

func setGateway(t *testing.T, spec *operatorv1alpha1.GatewaySpec) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	gw := &operatorv1alpha1.APIGateway{}
	err := k8sClient.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)
	if apierrors.IsNotFound(err) {
		gw = &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}, Spec: operatorv1alpha1.APIGatewaySpec{Gateway: spec}}
		g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	gw.Spec.Gateway = spec
	g.Expect(k8sClient.Update(ctx, gw)).To(Succeed())
}

func secret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

func liveGateway(t *testing.T) *networkingv1.Gateway {
	t.Helper()
	gw := &networkingv1.Gateway{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: operatorv1alpha1.DefaultGatewayName}, gw)).To(Succeed())
	return gw
}

func gone(obj client.Object, name string) bool {
	return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj))
}

// userPair issues a CA and a serving certificate for *.domain the way a
// user (or cert-manager) would, valid from now for validity.
func userPair(t *testing.T, domain string, now time.Time, validity time.Duration) (certs.Pair, certs.Pair) {
	t.Helper()
	ca, err := certs.IssueCA(domain, now, 10*validity)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	serving, err := certs.IssueServing(ca, domain, now, validity)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ca, serving
}

func tlsSecret(name string, p certs.Pair) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: p.CertPEM, corev1.TLSPrivateKeyKey: p.KeyPEM},
	}
}

// TestDefaultGatewayLifecycle walks one APIGateway through the user's
// story: a selfSigned gateway, its renewal, a switch to the user's own
// Secret (an invalid one first), to cert-manager, and its removal once no
// APIRule uses it. The steps share the cluster's one APIGateway.
func TestDefaultGatewayLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(start)
	r := newReconciler(clk)
	domain := "example.com"

	t.Run("a namespace that does not exist is reported", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: domain, Namespace: "ingress-later"})
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayError))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonNamespaceNotFound))
		g.Expect(st.Message).To(ContainSubstring("namespace ingress-later"))
	})

	t.Run("selfSigned: a Gateway for *.domain with a certificate clients trusting the published CA accept", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: domain})
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayReady))
		g.Expect(st.Gateway).To(Equal("istio-system/portico-gateway"))
		g.Expect(st.Hosts).To(Equal([]string{"*.example.com"}))
		g.Expect(st.SecretName).To(Equal(SelfSignedSecret))
		g.Expect(st.CAConfigMap).To(Equal("portico-gateway-ca"))
		g.Expect(st.NotAfter.Time).To(BeTemporally("~", start.Add(90*24*time.Hour), time.Hour))

		live := liveGateway(t)
		g.Expect(live.Spec.Selector).To(Equal(map[string]string{"istio": "ingressgateway"}))
		g.Expect(live.Spec.Servers).To(HaveLen(2))
		https, http := live.Spec.Servers[0], live.Spec.Servers[1]
		g.Expect(https.Port.Number).To(BeEquivalentTo(443))
		g.Expect(https.Port.Protocol).To(Equal("HTTPS"))
		g.Expect(https.Hosts).To(Equal([]string{"*.example.com"}))
		g.Expect(https.Tls.Mode).To(Equal(networkingapi.ServerTLSSettings_SIMPLE))
		g.Expect(https.Tls.CredentialName).To(Equal(SelfSignedSecret))
		g.Expect(http.Port.Number).To(BeEquivalentTo(80))
		g.Expect(http.Tls.HttpsRedirect).To(BeTrue())

		health := &networkingv1.VirtualService{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: HealthVirtualService}, health)).To(Succeed())
		g.Expect(health.Spec.Hosts).To(Equal([]string{"healthz.example.com"}))
		g.Expect(health.Spec.Gateways).To(Equal([]string{"istio-system/portico-gateway"}))
		g.Expect(health.Spec.Http[0].DirectResponse.Status).To(BeEquivalentTo(200))

		serving := secret(t, SelfSignedSecret)
		g.Expect(serving.Type).To(Equal(corev1.SecretTypeTLS))
		cm := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "portico-gateway-ca"}, cm)).To(Succeed())
		g.Expect(certs.Verify(pairOf(serving), []byte(cm.Data["ca.crt"]), "orders.example.com", start)).To(Succeed())
		g.Expect(certs.Verify(pairOf(serving), []byte(cm.Data["ca.crt"]), "orders.example.org", start)).NotTo(Succeed())
		for _, obj := range []client.Object{live, health, serving, cm, secret(t, CASecret)} {
			g.Expect(obj.GetOwnerReferences()).To(HaveLen(1), "%T %s", obj, obj.GetName())
			g.Expect(*obj.GetOwnerReferences()[0].Controller).To(BeTrue())
		}

		rv := serving.ResourceVersion
		g.Expect(reconcileOnce(t, r).State).To(Equal(operatorv1alpha1.GatewayReady))
		g.Expect(secret(t, SelfSignedSecret).ResourceVersion).To(Equal(rv), "nothing to renew: no write")
	})

	t.Run("selfSigned: the serving certificate is renewed after two thirds of its lifetime, from the same CA", func(t *testing.T) {
		g := NewWithT(t)
		caBefore := secret(t, CASecret).ResourceVersion
		before := pairOf(secret(t, SelfSignedSecret))
		clk.SetTime(start.Add(59 * 24 * time.Hour))
		reconcileOnce(t, r)
		g.Expect(pairOf(secret(t, SelfSignedSecret))).To(Equal(before), "not yet")
		clk.SetTime(start.Add(61 * 24 * time.Hour))
		st := reconcileOnce(t, r)
		after := pairOf(secret(t, SelfSignedSecret))
		g.Expect(after).NotTo(Equal(before))
		g.Expect(secret(t, CASecret).ResourceVersion).To(Equal(caBefore), "the CA stays")
		g.Expect(st.NotAfter.Time).To(BeTemporally("~", clk.Now().Add(90*24*time.Hour), time.Hour))
		cm := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "portico-gateway-ca"}, cm)).To(Succeed())
		g.Expect(certs.Verify(after, []byte(cm.Data["ca.crt"]), "orders.example.com", clk.Now())).To(Succeed())
	})

	t.Run("selfSigned: a deleted Secret is reissued", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8sClient.Delete(ctx, secret(t, SelfSignedSecret))).To(Succeed())
		g.Expect(reconcileOnce(t, r).State).To(Equal(operatorv1alpha1.GatewayReady))
		secret(t, SelfSignedSecret)
	})

	t.Run("secretName: an invalid Secret is reported and the Gateway keeps its valid certificate", func(t *testing.T) {
		g := NewWithT(t)
		now := clk.Now()
		_, expired := userPair(t, domain, now.Add(-48*time.Hour), 24*time.Hour+time.Hour)
		own := tlsSecret("own-cert", expired)
		g.Expect(k8sClient.Create(ctx, own)).To(Succeed())
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: domain, Certificate: &operatorv1alpha1.GatewayCertificate{SecretName: "own-cert"}})
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayError))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonCertificateInvalid))
		g.Expect(st.Message).To(ContainSubstring("expired"))
		g.Expect(st.Message).To(ContainSubstring("keeps serving"))
		g.Expect(credentialOf(liveGateway(t))).To(Equal(SelfSignedSecret), "no window without a valid certificate")
		secret(t, SelfSignedSecret)

		_, wrongDomain := userPair(t, "example.org", now, 30*24*time.Hour)
		own = secret(t, "own-cert")
		own.Data = map[string][]byte{corev1.TLSCertKey: wrongDomain.CertPEM, corev1.TLSPrivateKeyKey: wrongDomain.KeyPEM}
		g.Expect(k8sClient.Update(ctx, own)).To(Succeed())
		st = reconcileOnce(t, r)
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonCertificateInvalid))
		g.Expect(st.Message).To(ContainSubstring("*.example.com"))
		g.Expect(credentialOf(liveGateway(t))).To(Equal(SelfSignedSecret))
	})

	t.Run("secretName: a valid Secret is served, never written, and the selfSigned objects go", func(t *testing.T) {
		g := NewWithT(t)
		_, valid := userPair(t, domain, clk.Now(), 10*24*time.Hour)
		own := secret(t, "own-cert")
		own.Data = map[string][]byte{corev1.TLSCertKey: valid.CertPEM, corev1.TLSPrivateKeyKey: valid.KeyPEM}
		g.Expect(k8sClient.Update(ctx, own)).To(Succeed())
		rv := secret(t, "own-cert").ResourceVersion
		st := reconcileOnce(t, r)
		g.Expect(credentialOf(liveGateway(t))).To(Equal("own-cert"))
		g.Expect(st.SecretName).To(Equal("own-cert"))
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayWarning), "expires within 14 days")
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonCertificateExpiring))
		g.Expect(gone(&corev1.Secret{}, SelfSignedSecret)).To(BeTrue())
		secret(t, CASecret) // kept, so clients that trust it still do after a switch back
		g.Expect(st.CAConfigMap).To(BeEmpty())
		own = secret(t, "own-cert")
		g.Expect(own.ResourceVersion).To(Equal(rv))
		g.Expect(own.OwnerReferences).To(BeEmpty())
	})

	t.Run("certManager: a Certificate is written; the Gateway moves to its Secret only once it is Ready", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: domain, Certificate: &operatorv1alpha1.GatewayCertificate{
			CertManager: &operatorv1alpha1.CertManagerCertificate{IssuerRef: operatorv1alpha1.IssuerReference{Name: "letsencrypt", Kind: "ClusterIssuer"}},
		}})
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayPending))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonCertificatePending))
		g.Expect(credentialOf(liveGateway(t))).To(Equal("own-cert"), "keeps serving the valid certificate it has")
		cert := &cmv1.Certificate{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: operatorv1alpha1.DefaultGatewayName}, cert)).To(Succeed())
		g.Expect(cert.Spec.DNSNames).To(Equal([]string{"*.example.com", "example.com"}))
		g.Expect(cert.Spec.SecretName).To(Equal(CertManagerSecret))
		g.Expect(cert.Spec.IssuerRef).To(Equal(cmmeta.IssuerReference{Name: "letsencrypt", Kind: "ClusterIssuer", Group: "cert-manager.io"}))

		// cert-manager issues: the Secret, then Ready.
		_, issued := userPair(t, domain, clk.Now(), 90*24*time.Hour)
		issuedSecret := tlsSecret(CertManagerSecret, issued)
		issuedSecret.Labels = cert.Spec.SecretTemplate.Labels // cert-manager copies them
		g.Expect(k8sClient.Create(ctx, issuedSecret)).To(Succeed())
		cert.Status.Conditions = []cmv1.CertificateCondition{{Type: cmv1.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready", Message: "issued"}}
		g.Expect(k8sClient.Status().Update(ctx, cert)).To(Succeed())
		st = reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
		g.Expect(credentialOf(liveGateway(t))).To(Equal(CertManagerSecret))
		g.Expect(secret(t, "own-cert").OwnerReferences).To(BeEmpty(), "the user's Secret is left as it was")
	})

	t.Run("an object of the same name Portico did not create is reported and left alone", func(t *testing.T) {
		g := NewWithT(t)
		caRV := secret(t, CASecret).ResourceVersion
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: domain})
		foreign := tlsSecret(SelfSignedSecret, pairOf(secret(t, "own-cert")))
		g.Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayError))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonObjectNotOwned))
		g.Expect(st.Message).To(ContainSubstring("Secret istio-system/portico-gateway-tls"))
		g.Expect(secret(t, SelfSignedSecret).OwnerReferences).To(BeEmpty())
		g.Expect(credentialOf(liveGateway(t))).To(Equal(CertManagerSecret), "the Gateway is not touched")
		g.Expect(k8sClient.Delete(ctx, foreign)).To(Succeed())
		g.Expect(reconcileOnce(t, r).State).To(Equal(operatorv1alpha1.GatewayReady))
		g.Expect(credentialOf(liveGateway(t))).To(Equal(SelfSignedSecret))
		g.Expect(gone(&cmv1.Certificate{}, operatorv1alpha1.DefaultGatewayName)).To(BeTrue(), "the certManager source's objects go")
		g.Expect(gone(&corev1.Secret{}, CertManagerSecret)).To(BeTrue())
		g.Expect(secret(t, CASecret).ResourceVersion).To(Equal(caRV), "back to selfSigned with the CA clients already trust")
	})

	t.Run("disabled: kept while APIRules use it, removed once none does", func(t *testing.T) {
		g := NewWithT(t)
		rule := &porticov1alpha1.APIRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
			Spec: porticov1alpha1.APIRuleSpec{
				Hosts:   []porticov1alpha1.Hostname{"orders.example.com"},
				Service: &porticov1alpha1.ServiceReference{Name: "orders", Port: 80},
				Rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}},
			},
		}
		g.Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		setGateway(t, &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: domain})
		st := reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayWarning))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonGatewayInUse))
		g.Expect(st.Message).To(ContainSubstring("istio-system/orders"))
		liveGateway(t)
		secret(t, SelfSignedSecret)

		g.Expect(k8sClient.Delete(ctx, rule)).To(Succeed())
		st = reconcileOnce(t, r)
		g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayDisabled))
		for name, obj := range map[string]client.Object{
			operatorv1alpha1.DefaultGatewayName: &networkingv1.Gateway{}, HealthVirtualService: &networkingv1.VirtualService{},
			SelfSignedSecret: &corev1.Secret{}, "portico-gateway-ca": &corev1.ConfigMap{},
		} {
			g.Expect(gone(obj, name)).To(BeTrue(), "%T %s", obj, name)
		}
		g.Expect(gone(&corev1.Secret{}, CASecret)).To(BeTrue())
		secret(t, "own-cert")
	})
}

func TestInUseMessageFitsTheLimit(t *testing.T) {
	g := NewWithT(t)
	var users []string
	for i := range 500 {
		users = append(users, "team-"+string(rune('a'+i%26))+"/rule-"+time.Duration(i).String())
	}
	msg := InUseMessage("istio-system/portico-gateway", users, 300)
	g.Expect(len(msg)).To(BeNumerically("<=", 300))
	g.Expect(msg).To(ContainSubstring("500 APIRule(s)"))
	g.Expect(msg).To(MatchRegexp(`\(and \d+ more\)$`))
	g.Expect(InUseMessage("istio-system/portico-gateway", []string{"b/x", "a/y"}, 300)).To(HaveSuffix("a/y, b/x"))
}
