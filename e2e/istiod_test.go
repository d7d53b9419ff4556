//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
)

// istiod, Istio's control plane (pilot-discovery, built by hack/istiod.sh
// from the istio.io/istio version test/istio pins), runs beside the node
// target's cluster as a host process for the whole suite: its validating
// webhook admits every Istio object anybody writes, it is the controller
// of GatewayClass istio, and it serves plaintext xDS on the node's address.
const (
	istiodNamespace = "istio-system"
	// istiodXDSPort is istiod's plaintext gRPC (xDS) port, on the node's
	// address so pods reach it.
	istiodXDSPort = 15010
	// istiodWebhookPort serves the validating webhook (HTTPS, the
	// suite's certificate).
	istiodWebhookPort = 15017
	// istiodValidator is the ValidatingWebhookConfiguration the suite
	// registers; its one webhook keeps the name Istio's own has.
	istiodValidator   = "portico-e2e-istiod-validator"
	istiodWebhookName = "validation.istio.io"
	// istiodFieldManager writes the suite's istiod objects.
	istiodFieldManager = "portico-e2e-istiod"
)

var (
	// istiod is the istiod host process; AfterSuite stops it.
	istiod *framework.Process
	// istiodBuild builds istiod (hack/istiod.sh) beside the node's setup.
	istiodBuild *framework.Process
	// istiodNodeIP is the node's address istiod listens on.
	istiodNodeIP string
)

// startIstiodBuild starts hack/istiod.sh in the background; startIstiod's
// own hack/istiod.sh waits for it (a lock) and then finds it built.
func startIstiodBuild() {
	var err error
	istiodBuild, err = framework.StartProcess(filepath.Join(root, "hack", "istiod.sh"), nil, nil,
		filepath.Join(artifacts, "istiod-build.log"))
	Expect(err).NotTo(HaveOccurred())
}

// istiodXDSAddress is where pods reach istiod's plaintext xDS (ADS) server:
// the node's address, port 15010.
func istiodXDSAddress() string {
	return net.JoinHostPort(istiodNodeIP, strconv.Itoa(istiodXDSPort))
}

// istiodReport adds a line to e2e/_artifacts/istiod-report.txt.
func istiodReport(format string, args ...any) {
	reportTo("istiod-report.txt", format, args...)
}

// startIstiod runs istiod against the node cluster and registers its
// validating webhook:
//
//   - identity: the ServiceAccount istio-system/istiod with the RBAC of
//     Istio's own istiod chart (helm template of the module's
//     manifests/charts/istio-control/istio-discovery), so istiod can do
//     exactly what an installed istiod may, no more (the admin
//     kubeconfig would hide a write a real istiod could not make);
//   - mesh config: none on disk, so istiod reads ConfigMap
//     istio-system/istio (key mesh) as installed, the one the login story
//     writes its extension providers into;
//   - Gateway API on with its status, the GatewayClass controller on (it
//     creates GatewayClass istio), the automated gateway deployment off
//     (the suite runs no Envoy);
//   - its webhook patchers off (VALIDATION_WEBHOOK_CONFIG_NAME and
//     INJECTION_WEBHOOK_CONFIG_NAME empty): the suite owns the webhook
//     configuration, istiod must not rewrite it;
//   - xDS plaintext on NODE_IP:15010, the webhook on NODE_IP:15017 with a
//     certificate of a CA the suite makes; its HTTP debug and monitoring
//     ports on free loopback ports.
//
// Its working directory is e2e/_artifacts/istiod (istiod reads and writes
// ./etc and ./var relative to it); its log is e2e/_artifacts/istiod.log.
func startIstiod(ctx context.Context) {
	By("running istiod (pilot-discovery) as a host process with Istio's own RBAC, and registering its validating webhook")
	started := time.Now()
	out, err := framework.Run(ctx, root, "hack/istiod.sh")
	Expect(err).NotTo(HaveOccurred(), out)
	binary := framework.LastLine(out)
	istiodNodeIP = nodeAddress(ctx)
	createOrExisting(ctx, &corev1.Namespace{ObjectMeta: metav1ObjectMeta(istiodNamespace, "")})
	applyIstiodRBAC(ctx)

	dir := filepath.Join(artifacts, "istiod")
	Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	kubeconfigFile := istiodKubeconfig(ctx, dir)
	caPEM := istiodServingCertificate(dir, istiodNodeIP)
	httpAddr, monitoringAddr := freeAddr(), freeAddr()
	_, ctrlzPort, err := net.SplitHostPort(freeAddr())
	Expect(err).NotTo(HaveOccurred())
	// istiod fetches the suite's token issuer's key set over HTTPS
	// trusting its CA (xdssidecars_test.go).
	issuerTrust := startTokenIssuer(dir, istiodNodeIP)
	// env -C: istiod's relative paths (./etc/cacerts, ./var/run/...) land
	// in its own directory of the artifacts.
	istiod, err = framework.StartProcess("env", []string{"-C", dir, binary, "discovery",
		"--kubeconfig=" + kubeconfigFile,
		"--meshConfig=" + filepath.Join(dir, "no-mesh-file"),
		"--networksConfig=" + filepath.Join(dir, "no-networks-file"),
		"--grpcAddr=" + istiodXDSAddress(),
		"--httpsAddr=" + net.JoinHostPort(istiodNodeIP, strconv.Itoa(istiodWebhookPort)),
		"--httpAddr=" + httpAddr,
		"--monitoringAddr=" + monitoringAddr,
		"--secureGRPCAddr=",
		"--ctrlz_port=" + ctrlzPort,
		"--tlsCertFile=" + filepath.Join(dir, "tls.crt"),
		"--tlsKeyFile=" + filepath.Join(dir, "tls.key"),
		"--caCertFile=" + filepath.Join(dir, "ca.crt"),
		"--log_output_level=default:info",
	}, []string{
		"POD_NAMESPACE=" + istiodNamespace, "POD_NAME=istiod-e2e", "REVISION=default",
		"PILOT_ENABLE_GATEWAY_API=true", "PILOT_ENABLE_GATEWAY_API_STATUS=true",
		"PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER=true",
		"PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false",
		"VALIDATION_WEBHOOK_CONFIG_NAME=", "INJECTION_WEBHOOK_CONFIG_NAME=",
		"SSL_CERT_FILE=" + issuerTrust,
		// Else istiod would prefer an in-cluster client.
		"KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=",
	}, filepath.Join(artifacts, "istiod.log"))
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		resp, err := http.Get("http://" + httpAddr + "/ready")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "istiod /ready: %s", body)
	}, 3*time.Minute, time.Second).Should(Succeed(), "istiod is ready; its log: %s", filepath.Join(artifacts, "istiod.log"))
	registerIstiodWebhook(ctx, caPEM)
	istiodReport("istiod ready and its webhook registered %s after the setup asked for it (build included)",
		time.Since(started).Round(100*time.Millisecond))
}

// metav1ObjectMeta is an object's name and namespace.
func metav1ObjectMeta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns}
}

// applyIstiodRBAC creates the ServiceAccount, (Cluster)Roles and bindings
// of Istio's own istiod chart, rendered by helm from the pinned module.
func applyIstiodRBAC(ctx context.Context) {
	chart := filepath.Join(istioModuleDir(ctx), "manifests", "charts", "istio-control", "istio-discovery")
	args := []string{"template", "istiod", chart, "--namespace", istiodNamespace}
	for _, t := range []string{"serviceaccount", "clusterrole", "clusterrolebinding", "role", "rolebinding"} {
		args = append(args, "--show-only", "templates/"+t+".yaml")
	}
	out, err := framework.Run(ctx, root, filepath.Join(testbin, "helm"), args...)
	Expect(err).NotTo(HaveOccurred(), out)
	decoder := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(out)), 4096)
	kinds := map[string]int{}
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if err == io.EOF {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) == 0 {
			continue
		}
		createOrExisting(ctx, obj)
		kinds[obj.GetKind()]++
	}
	Expect(kinds).To(HaveKey("ClusterRole"))
	Expect(kinds).To(HaveKey("ServiceAccount"))
}

// istioModuleDir is the module cache directory of the istio.io/istio
// version test/istio pins.
func istioModuleDir(ctx context.Context) string {
	out, err := framework.Run(ctx, filepath.Join(root, "test", "istio"), "go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio")
	Expect(err).NotTo(HaveOccurred(), out)
	return framework.LastLine(out)
}

// istiodKubeconfig writes a kubeconfig with a token of istio-system/istiod
// (TokenRequest, four hours: longer than the suite) and returns its path.
func istiodKubeconfig(ctx context.Context, dir string) string {
	token, err := clientset.CoreV1().ServiceAccounts(istiodNamespace).CreateToken(ctx, "istiod",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	ca := restConfig.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(restConfig.CAFile)
		Expect(err).NotTo(HaveOccurred())
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["node"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["istiod"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["istiod"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: "istiod"}
	cfg.CurrentContext = "istiod"
	path := filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// istiodServingCertificate writes ca.crt, tls.crt and tls.key into dir: a
// CA of the suite's and the webhook's serving certificate for ip, signed by
// it (ECDSA P-256, one day). It returns the CA's PEM, the webhook's
// caBundle.
func istiodServingCertificate(dir, ip string) []byte {
	ca := newClientAuthority("Portico e2e istiod CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "istiod.istio-system.svc"},
		DNSNames:    []string{"istiod.istio-system.svc", "istiod.istio-system.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP(ip)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.cert, &key.PublicKey, ca.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string][]byte{
		"ca.crt":  ca.pem,
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	} {
		Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
	}
	return ca.pem
}

// istioValidated are the API groups istiod's webhook validates (those of
// Istio's own ValidatingWebhookConfiguration).
var istioValidated = []string{"networking.istio.io", "security.istio.io", "telemetry.istio.io", "extensions.istio.io"}

// registerIstiodWebhook registers istiod's validating webhook for every
// create and update of an Istio object (failurePolicy Fail: if istiod does
// not answer, the write fails) and waits until istiod answers it: a
// dry-run of an invalid VirtualService is denied by it.
func registerIstiodWebhook(ctx context.Context, caPEM []byte) {
	Expect(k8sClient.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1ObjectMeta(istiodValidator, ""),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: istiodWebhookName,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To(fmt.Sprintf("https://%s/validate", net.JoinHostPort(istiodNodeIP, strconv.Itoa(istiodWebhookPort)))),
				CABundle: caPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: istioValidated, APIVersions: []string{"*"}, Resources: []string{"*"},
					Scope: ptr.To(admissionregistrationv1.AllScopes),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}, client.FieldOwner(istiodFieldManager))).To(Succeed())
	// The Istio CRDs are installed by a later spec ("rolls the controllers
	// out once Istio's CRDs are installed"): istiod is asked directly, as
	// the API server asks it.
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	Eventually(func(g Gomega) {
		allowed, message := istiodReview(g, https, invalidVirtualService(istiodNamespace))
		g.Expect(allowed).To(BeFalse())
		g.Expect(message).To(ContainSubstring("regex"))
		allowed, message = istiodReview(g, https, validVirtualService(istiodNamespace))
		g.Expect(allowed).To(BeTrue(), message)
	}, timeout, interval).Should(Succeed(), "istiod answers its webhook")
}

// istiodReview sends obj to istiod's webhook as the API server would (an
// AdmissionReview v1 of a create) and returns its verdict.
func istiodReview(g Gomega, https *http.Client, obj client.Object) (bool, string) {
	raw, err := json.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	gvk := obj.GetObjectKind().GroupVersionKind()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "portico-e2e-probe",
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "virtualservices"},
			Name:      obj.GetName(),
			Namespace: obj.GetNamespace(),
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	g.Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("https://%s/validate", net.JoinHostPort(istiodNodeIP, strconv.Itoa(istiodWebhookPort)))
	resp, err := https.Post(url, "application/json", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	answer := admissionv1.AdmissionReview{}
	g.Expect(json.NewDecoder(resp.Body).Decode(&answer)).To(Succeed())
	g.Expect(answer.Response).NotTo(BeNil())
	msg := ""
	if answer.Response.Result != nil {
		msg = answer.Response.Result.Message
	}
	return answer.Response.Allowed, msg
}

// validVirtualService routes invalid.example.com to the Service orders.
func validVirtualService(ns string) *networkingv1.VirtualService {
	vs := &networkingv1.VirtualService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "VirtualService"},
		ObjectMeta: metav1ObjectMeta("portico-e2e-istiod-probe", ns),
	}
	vs.Spec.Hosts = []string{"invalid.example.com"}
	vs.Spec.Http = []*networkingapi.HTTPRoute{{
		Route: []*networkingapi.HTTPRouteDestination{{Destination: &networkingapi.Destination{Host: "orders"}}},
	}}
	return vs
}

// invalidVirtualService is validVirtualService with a URI regex that does
// not compile: the CRD's schema admits it, istiod's validation does not.
func invalidVirtualService(ns string) *networkingv1.VirtualService {
	vs := validVirtualService(ns)
	vs.Spec.Http[0].Match = []*networkingapi.HTTPMatchRequest{{
		Uri: &networkingapi.StringMatch{MatchType: &networkingapi.StringMatch_Regex{Regex: "/orders/(["}},
	}}
	return vs
}

// istiodWebhookSpecs prove that istiod's webhook is in the path of every
// Istio write: an object istiod's validation refuses (and the CRD's schema
// admits) is denied, on create and on update, with istiod's message; the
// objects Portico wrote were admitted; and istiod has not rewritten the
// suite's webhook configuration. Call it once Portico has written Istio
// objects in namespace shop (after "turns an APIRule into Istio objects").
func istiodWebhookSpecs() {
	It("admits Istio objects only through istiod's webhook: istiod denies an invalid VirtualService and leaves the suite's webhook configuration alone", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("istiod runs beside the node target")
		}
		denied := `admission webhook "` + istiodWebhookName + `" denied the request`
		By("creating a VirtualService whose URI regex does not compile")
		err := k8sClient.Create(ctx, invalidVirtualService("shop"))
		Expect(err).To(MatchError(ContainSubstring(denied)))
		Expect(err.Error()).To(ContainSubstring("regex"))
		istiodReport("create of an invalid VirtualService: %v", err)

		By("updating a valid VirtualService into the same form")
		valid := validVirtualService("shop")
		Expect(k8sClient.Create(ctx, valid)).To(Succeed(), "istiod admits a valid VirtualService")
		DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, valid)).To(Succeed()) })
		valid.Spec.Http[0].Match = invalidVirtualService("shop").Spec.Http[0].Match
		err = k8sClient.Update(ctx, valid)
		Expect(err).To(MatchError(ContainSubstring(denied)))

		By("finding the objects Portico wrote, admitted by istiod")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &networkingv1.VirtualService{})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &securityv1.AuthorizationPolicy{})).To(Succeed())

		By("finding the webhook configuration as the suite wrote it: istiod's patchers are off")
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: istiodValidator}, vwc)).To(Succeed())
		Expect(vwc.Generation).To(BeEquivalentTo(1), "nobody changed its webhooks")
		for _, f := range vwc.ManagedFields {
			Expect(f.Manager).To(Equal(istiodFieldManager), "only the suite wrote it")
		}
		Expect(*vwc.Webhooks[0].FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		Expect(istiod.Exited()).To(BeFalse(), "istiod runs")
	})
}

// The Istio Gateway API story's names: istiod serves GatewayClass istio;
// the Gateway istio-system/istio-web is the APIRules' parent.
const (
	istioClass          = "istio"
	istioControllerName = "istio.io/gateway-controller"
	istioGatewayName    = "istio-web"
	// istioInternalListener admits routes of the Gateway's namespace only.
	istioInternalListener = "internal"
)

// expectRouteAcceptedBy checks that controller accepted the HTTPRoute named
// key on the Gateway ns/name, with its references resolved, at the route's
// generation.
func expectRouteAcceptedBy(g Gomega, key client.ObjectKey, controller, ns, name string) {
	route := &gatewayapiv1.HTTPRoute{}
	g.Expect(k8sClient.Get(context.Background(), key, route)).To(Succeed())
	var parent *gatewayapiv1.RouteParentStatus
	for i := range route.Status.Parents {
		p := &route.Status.Parents[i]
		if string(p.ParentRef.Name) == name && p.ParentRef.Namespace != nil && string(*p.ParentRef.Namespace) == ns {
			parent = p
		}
	}
	g.Expect(parent).NotTo(BeNil(), "HTTPRoute %s: a status of parent %s/%s", key, ns, name)
	g.Expect(string(parent.ControllerName)).To(Equal(controller))
	for _, t := range []gatewayapiv1.RouteConditionType{gatewayapiv1.RouteConditionAccepted, gatewayapiv1.RouteConditionResolvedRefs} {
		c := apimeta.FindStatusCondition(parent.Conditions, string(t))
		g.Expect(c).NotTo(BeNil(), "HTTPRoute %s: %s", key, t)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "HTTPRoute %s: %s %s: %s", key, t, c.Reason, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(route.Generation))
	}
}

// istioGatewayAPISpecs are the Gateway API story on Istio: istiod creates
// and accepts GatewayClass istio; the sample APIRule (orders, passed in)
// with spec.parentRef naming an Istio-class Gateway becomes an HTTPRoute
// and is Ready only from istiod's own route status (parent controller
// istio.io/gateway-controller, Accepted and ResolvedRefs); a route istiod
// does not accept (a listener that admits routes of the Gateway's
// namespace only) leaves its APIRule RouteNotAccepted with istiod's reason.
// No Envoy runs: what istiod computes for the gateway is served over xDS
// (istiodXDSAddress), not routed here.
//
// Call it inside the Portico Describe once the orders Service exists; it
// installs the Gateway API's CRDs if the Traefik story has not, and deletes
// what it made.
func istioGatewayAPISpecs(sample *gatewayv1alpha1.APIRule) {
	onIstioGateway := func(name, host, section string) *gatewayv1alpha1.APIRule {
		r := sample.DeepCopy()
		r.Name = name
		r.Spec.Hosts = []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(host)}
		r.Spec.Gateway = ""
		r.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Namespace: istiodNamespace, Name: istioGatewayName, SectionName: section}
		return r
	}
	orders := onIstioGateway(sample.Name+"-istio", "orders-istio.example.com", "")
	internal := onIstioGateway(sample.Name+"-istio-internal", "orders-istio-internal.example.com", istioInternalListener)
	skipUnlessNode := func() {
		if target != framework.TargetNode {
			Skip("istiod runs beside the node target")
		}
	}

	It("is Ready on an Istio-class Gateway once istiod, the controller of GatewayClass istio, accepts the route", func(ctx SpecContext) {
		skipUnlessNode()
		installGatewayAPI(ctx)
		By("finding GatewayClass istio, created and accepted by istiod")
		Eventually(func(g Gomega) {
			class := &gatewayapiv1.GatewayClass{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: istioClass}, class)).To(Succeed())
			g.Expect(string(class.Spec.ControllerName)).To(Equal(istioControllerName))
			g.Expect(apimeta.IsStatusConditionTrue(class.Status.Conditions, string(gatewayapiv1.GatewayClassConditionStatusAccepted))).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		all, same := gatewayapiv1.NamespacesFromAll, gatewayapiv1.NamespacesFromSame
		Expect(k8sClient.Create(ctx, &gatewayapiv1.Gateway{
			ObjectMeta: metav1ObjectMeta(istioGatewayName, istiodNamespace),
			Spec: gatewayapiv1.GatewaySpec{
				GatewayClassName: istioClass,
				Listeners: []gatewayapiv1.Listener{
					{Name: "http", Protocol: gatewayapiv1.HTTPProtocolType, Port: 80,
						AllowedRoutes: &gatewayapiv1.AllowedRoutes{Namespaces: &gatewayapiv1.RouteNamespaces{From: &all}}},
					{Name: istioInternalListener, Protocol: gatewayapiv1.HTTPProtocolType, Port: 8081,
						AllowedRoutes: &gatewayapiv1.AllowedRoutes{Namespaces: &gatewayapiv1.RouteNamespaces{From: &same}}},
				},
			},
		})).To(Succeed())

		started := time.Now()
		Expect(k8sClient.Create(ctx, orders.DeepCopy())).To(Succeed())
		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(orders))
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
			expectRouteAcceptedBy(g, client.ObjectKeyFromObject(orders), istioControllerName, istiodNamespace, istioGatewayName)
		}, timeout, interval).Should(Succeed())
		gw := &gatewayapiv1.Gateway{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: istiodNamespace, Name: istioGatewayName}, gw)).To(Succeed())
		Expect(apimeta.IsStatusConditionTrue(gw.Status.Conditions, string(gatewayapiv1.GatewayConditionAccepted))).To(BeTrue(), "istiod accepted the Gateway")
		By("finding that istiod wrote only the status of Portico's HTTPRoute, never its spec")
		route := &gatewayapiv1.HTTPRoute{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(orders), route)).To(Succeed())
		statusWriters := []string{}
		for _, f := range route.ManagedFields {
			if f.Subresource == "status" {
				statusWriters = append(statusWriters, f.Manager)
				continue
			}
			Expect(f.Manager).To(Equal("apirule-controller"), "only Portico writes the HTTPRoute itself")
		}
		Expect(statusWriters).NotTo(BeEmpty(), "istiod wrote the route's status")
		expectExplainedByStatus(ctx, string(orders.Spec.Hosts[0]), 80, true) // explain_test.go
		istiodReport("APIRule %s: Applied from istiod's route status %s after it was created (Gateway %s/%s Programmed: %v; status written by %v)",
			client.ObjectKeyFromObject(orders), time.Since(started).Round(100*time.Millisecond), istiodNamespace, istioGatewayName,
			apimeta.IsStatusConditionTrue(gw.Status.Conditions, string(gatewayapiv1.GatewayConditionProgrammed)), statusWriters)
	})

	It("is RouteNotAccepted with istiod's reason when istiod does not accept the route", func(ctx SpecContext) {
		skipUnlessNode()
		Expect(k8sClient.Create(ctx, internal.DeepCopy())).To(Succeed())
		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(internal))
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonRouteNotAccepted), ready.Message)
			g.Expect(ready.Message).To(ContainSubstring("controller " + istioControllerName))
			g.Expect(ready.Message).To(ContainSubstring(string(gatewayapiv1.RouteReasonNotAllowedByListeners)))
		}, timeout, interval).Should(Succeed())
		expectExplainedByStatus(ctx, string(internal.Spec.Hosts[0]), 8081, false) // explain_test.go
		istiodReport("APIRule %s on listener %s: %s", client.ObjectKeyFromObject(internal), istioInternalListener,
			apiRuleReady(Default, client.ObjectKeyFromObject(internal)).Message)
	})

	It("removes the HTTPRoutes when the APIRules on the Istio-class Gateway are deleted; then the Gateway goes", func(ctx SpecContext) {
		skipUnlessNode()
		for _, r := range []*gatewayv1alpha1.APIRule{orders, internal} {
			Expect(k8sClient.Delete(ctx, r.DeepCopy())).To(Succeed())
			Eventually(isGone(&gatewayapiv1.HTTPRoute{ObjectMeta: r.ObjectMeta}), timeout, interval).Should(BeTrue())
			Eventually(isGone(r.DeepCopy()), timeout, interval).Should(BeTrue())
		}
		Expect(k8sClient.Delete(ctx, &gatewayapiv1.Gateway{ObjectMeta: metav1ObjectMeta(istioGatewayName, istiodNamespace)})).To(Succeed())
	})
}
