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
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/hack/release/olm"
	"github.com/portico-dev/portico/test/framework"
)

// OLM v1's API (operator-controller and catalogd v1.2.0), read and written
// as unstructured objects: the suite does not import OLM v1's module.
var (
	clusterCatalogGVK   = schema.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterCatalog"}
	clusterExtensionGVK = schema.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterExtension"}
)

var (
	// olmV1Build builds OLM v1 (hack/olmv1.sh) beside the node's first
	// specs; olmV1Catalogd and olmV1Controller are its host processes.
	// AfterSuite stops them.
	olmV1Build, olmV1Catalogd, olmV1Controller *framework.Process
)

// olmV1Enabled reports whether the OLM v1 story runs: always, unless
// E2E_OLMV1=0 (a quicker run of everything else).
func olmV1Enabled() bool { return os.Getenv("E2E_OLMV1") != "0" }

// startOLMv1Build starts hack/olmv1.sh in the background; startOLMv1's own
// hack/olmv1.sh waits for it (a lock) and then finds it built.
func startOLMv1Build() {
	var err error
	olmV1Build, err = framework.StartProcess(filepath.Join(root, "hack", "olmv1.sh"), nil, nil,
		filepath.Join(artifacts, "olmv1-build.log"))
	Expect(err).NotTo(HaveOccurred())
}

// stopOLMv1 stops OLM v1's processes (and its build, if still running).
func stopOLMv1() {
	olmV1Build.Stop()
	olmV1Catalogd.Stop()
	olmV1Controller.Stop()
}

// olmV1Namespace is OLM v1's system namespace (its Helm release records
// of installed extensions), upstream's default.
const olmV1Namespace = "olmv1-system"

// porticoCRDs are the CRDs Portico's bundle owns.
var porticoCRDs = []string{"apigateways.operator.portico.dev", "apirules.gateway.portico.dev", "ratelimits.gateway.portico.dev"}

// startOLMv1 runs OLM v1 — catalogd and operator-controller built from Go
// modules by hack/olmv1.sh — as host processes beside the node, with the
// suite's admin credentials (OLM v1's own identity is not under test: it
// applies every bundle object with the token of the ClusterExtension's
// installer ServiceAccount, whose RBAC is Portico's config/olmv1 sample):
//
//   - catalogd serves catalog content over HTTPS on loopback with a
//     certificate of a CA the suite makes; operator-controller trusts that
//     CA (--catalogd-cas-dir);
//   - both pull images (the catalog, the bundles) from the node's registry
//     on 127.0.0.1, plain HTTP, which a registries.conf of the suite allows
//     (in a HOME of their own), as upstream's e2e configures its own
//     registry;
//   - their logs are e2e/_artifacts/olmv1/{catalogd,operator-controller}.log.
func startOLMv1(ctx context.Context) {
	started := time.Now()
	out, err := framework.Run(ctx, root, "hack/olmv1.sh")
	Expect(err).NotTo(HaveOccurred(), out)
	binDir := framework.LastLine(out)
	version := strings.SplitN(filepath.Base(binDir), "-", 2)[0] // <version>-<key>

	By("installing OLM v1 " + version + "'s CRDs (ClusterCatalog, ClusterExtension) and its system namespace")
	files, err := filepath.Glob(filepath.Join(binDir, "crds", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).To(HaveLen(2))
	for _, f := range files {
		data, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8syaml.Unmarshal(data, crd)).To(Succeed(), f)
		createOrExisting(ctx, crd)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
			g.Expect(crdEstablished(crd)).To(BeTrue(), crd.Name)
		}, timeout, interval).Should(Succeed())
	}
	createOrExisting(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olmV1Namespace}})

	dir := filepath.Join(artifacts, "olmv1")
	Expect(os.MkdirAll(filepath.Join(dir, "ca"), 0o700)).To(Succeed())
	catalogAddr := freeAddr()
	ca := olmV1ServingCertificate(dir, catalogAddr)
	Expect(os.WriteFile(filepath.Join(dir, "ca", "ca.crt"), ca, 0o600)).To(Succeed())
	registry, _, _ := strings.Cut(registryRepo, "/")
	// containers/image reads $HOME/.config/containers/registries.conf
	// before /etc's (the library does not read CONTAINERS_REGISTRIES_CONF,
	// only its command-line tools do): a home of OLM v1's own.
	home := filepath.Join(dir, "home")
	Expect(os.MkdirAll(filepath.Join(home, ".config", "containers"), 0o700)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(home, ".config", "containers", "registries.conf"),
		[]byte(fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n", registry)), 0o600)).To(Succeed())
	env := []string{
		"KUBECONFIG=" + kubeconfig, "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=",
		"HOME=" + home, "TMPDIR=" + dir,
	}
	_, webhookPort, err := net.SplitHostPort(freeAddr())
	Expect(err).NotTo(HaveOccurred())
	catalogdProbe, controllerProbe := freeAddr(), freeAddr()
	for _, d := range []string{"catalogd-cache", "operator-controller-cache"} {
		Expect(os.MkdirAll(filepath.Join(dir, d), 0o700)).To(Succeed())
	}

	By("running catalogd and operator-controller " + version + " as host processes")
	catalogd, err := framework.StartProcess(filepath.Join(binDir, "catalogd"), []string{
		"--system-namespace=" + olmV1Namespace,
		"--catalogs-server-addr=" + catalogAddr,
		"--external-address=" + catalogAddr,
		"--tls-cert=" + filepath.Join(dir, "tls.crt"), "--tls-key=" + filepath.Join(dir, "tls.key"),
		"--metrics-bind-address=" + freeAddr(),
		"--health-probe-bind-address=" + catalogdProbe,
		"--webhook-server-port=" + webhookPort,
		"--cache-dir=" + filepath.Join(dir, "catalogd-cache"),
	}, env, filepath.Join(dir, "catalogd.log"))
	Expect(err).NotTo(HaveOccurred())
	olmV1Catalogd = catalogd
	controller, err := framework.StartProcess(filepath.Join(binDir, "operator-controller"), []string{
		"--system-namespace=" + olmV1Namespace,
		"--catalogd-cas-dir=" + filepath.Join(dir, "ca"),
		"--health-probe-bind-address=" + controllerProbe,
		"--cache-path=" + filepath.Join(dir, "operator-controller-cache"),
	}, env, filepath.Join(dir, "operator-controller.log"))
	Expect(err).NotTo(HaveOccurred())
	olmV1Controller = controller
	for name, probe := range map[string]string{"catalogd": catalogdProbe, "operator-controller": controllerProbe} {
		Eventually(func(g Gomega) {
			g.Expect(catalogd.Exited()).To(BeFalse(), "catalogd exited: %v; its log: %s", catalogd.Err(), filepath.Join(dir, "catalogd.log"))
			g.Expect(controller.Exited()).To(BeFalse(), "operator-controller exited: %v; its log: %s", controller.Err(), filepath.Join(dir, "operator-controller.log"))
			g.Expect(httpGetOK("http://" + probe + "/readyz")).To(Succeed())
		}, 2*timeout, interval).Should(Succeed(), name+" is ready")
	}
	appendReport(fmt.Sprintf("OLM v1 %s (catalogd, operator-controller) ready in %s (build included)", version, time.Since(started).Round(100*time.Millisecond)))
}

// httpGetOK fails unless url answers 200.
func httpGetOK(url string) error {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return nil
}

// olmV1ServingCertificate writes tls.crt and tls.key into dir: catalogd's
// serving certificate for addr's IP, signed by a CA of the suite's (ECDSA
// P-256, one day). It returns the CA's PEM.
func olmV1ServingCertificate(dir, addr string) []byte {
	host, _, err := net.SplitHostPort(addr)
	Expect(err).NotTo(HaveOccurred())
	ca := newClientAuthority("Portico e2e OLM v1 CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "catalogd"},
		IPAddresses: []net.IP{net.ParseIP(host)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.cert, &key.PublicKey, ca.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)).To(Succeed())
	return ca.pem
}

// crdEstablished reports the CRD's Established condition.
func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// olmV1Samples reads config/olmv1/clusterextension.yaml, the ClusterCatalog
// and ClusterExtension users start from, keyed by kind.
func olmV1Samples() map[string]*unstructured.Unstructured {
	data, err := os.ReadFile(filepath.Join(root, "config", "olmv1", "clusterextension.yaml"))
	Expect(err).NotTo(HaveOccurred())
	out := map[string]*unstructured.Unstructured{}
	decoder := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if err == io.EOF {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) != 0 {
			out[obj.GetKind()] = obj
		}
	}
	Expect(out).To(HaveKey("ClusterCatalog"))
	Expect(out).To(HaveKey("ClusterExtension"))
	return out
}

// olmV1Condition is the status of condition t of an OLM v1 object, and its
// reason and message.
func olmV1Condition(obj *unstructured.Unstructured, t string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// installedBundle is the bundle a ClusterExtension reports installed
// (name and version), "" before.
func installedBundle(g Gomega, ctx context.Context, name string) (bundleName, version string) {
	ext := &unstructured.Unstructured{}
	ext.SetGroupVersionKind(clusterExtensionGVK)
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, ext)).To(Succeed())
	status, reason, message := olmV1Condition(ext, "Installed")
	g.Expect(status).To(Equal("True"), "ClusterExtension %s Installed: %s %s", name, reason, message)
	bundleName, _, _ = unstructured.NestedString(ext.Object, "status", "install", "bundle", "name")
	version, _, _ = unstructured.NestedString(ext.Object, "status", "install", "bundle", "version")
	return bundleName, version
}

// expectRunningRelease checks that the operator and every controller run
// the release's images and that the APIGateway is Ready on them.
func expectRunningRelease(g Gomega, version string) {
	g.Expect(deployment(g, "portico-operator").Spec.Template.Spec.Containers[0].Image).To(Equal(releaseImage(version, "portico-operator")))
	st := gatewayStatus(g)
	g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
	for c := range filterStatus(st.Controllers) {
		image := releaseImage(version, string(c.Name)+"-controller")
		g.Expect(c.Image).To(Equal(image), string(c.Name))
		g.Expect(c.ImageID).To(HaveSuffix("@"+digestOf(image)), "%s runs the bundle's image", c.Name)
		g.Expect(c.Phase).To(Equal(operatorv1alpha1.PhaseReady))
	}
}

// mayListSecrets asks the API server (SubjectAccessReview) whether user
// may list Secrets in ns ("": in every namespace).
func mayListSecrets(ctx context.Context, user, ns string) bool {
	review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "secrets"},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return review.Status.Allowed
}

// kubectl runs the node's kubectl with the admin kubeconfig.
func kubectl(ctx context.Context, args ...string) string {
	out, err := framework.Run(ctx, root, filepath.Join(testbin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s", strings.Join(args, " "))
	return out
}

// olmV1Specs are the OLM v1 users' story, run after OLM v0's: the cluster
// moves Portico from OLM v0 to OLM v1 (operator-controller and catalogd,
// built from Go modules) the way docs/releases.md says — OLM v0's
// Subscription, CSV and OperatorGroup removed (the CRDs, users' objects and
// the running controllers stay), the CRDs handed to the ClusterExtension's
// release, the installer ServiceAccount of config/olmv1 applied — then
// installs from a ClusterCatalog with the sample ClusterExtension, and
// upgrades through the catalog with requests counted. gatewayIP is where
// the APIRule's route answers.
func olmV1Specs(gatewayIP *string) {
	var (
		catalog, extension *unstructured.Unstructured
		uids               map[string]string
	)

	It("moves Portico from OLM v0 to OLM v1: catalog served, ClusterExtension installed by the installer ServiceAccount, every object kept, the APIGateway Ready on the bundle's images", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("OLM v1 installs real pods: the node target only")
		}
		Expect(olmOPMImage).NotTo(BeEmpty(), "the OLM v0 specs ran (their opm image is the catalog's base)")
		uids = objectUIDs(ctx)
		Expect(uids).To(HaveKey(ContainSubstring("VirtualService shop/orders")))
		traffic := startTraffic(ctx, "http://"+*gatewayIP+"/health", "orders.example.com")

		By("removing OLM v0's install of Portico: Subscription, CSV, OperatorGroup, CatalogSource (CRDs and users' objects stay)")
		sub := &operatorsv1alpha1.Subscription{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: olm.Package}, sub)).To(Succeed())
		installed := sub.Status.InstalledCSV
		Expect(installed).NotTo(BeEmpty())
		Expect(k8sClient.Delete(ctx, sub)).To(Succeed())
		Expect(k8sClient.Delete(ctx, &operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: installed}})).To(Succeed())
		Expect(k8sClient.Delete(ctx, &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "portico"}})).To(Succeed())
		Expect(k8sClient.Delete(ctx, &operatorsv1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: OLMNamespace, Name: olm.Package}})).To(Succeed())
		// OLM v0's objects go with the CSV (owner references): wait until
		// they are gone, or OLM v1's release would meet them.
		Eventually(isGone(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "portico-operator"}}), 2*timeout, interval).Should(BeTrue())
		Eventually(isGone(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "portico-operator"}}), 2*timeout, interval).Should(BeTrue())
		// The bundle's Roles and RoleBindings OLM v0 created stay behind
		// (no owner: OLM v0 marks them olm.managed only), and OLM v1 refuses
		// to take over objects of another: docs/releases.md's step deletes
		// them, by OLM v0's label.
		kubectl(ctx, "delete", "role,rolebinding", "-n", namespace, "-l", "olm.managed=true")

		By("handing the CRDs to the ClusterExtension's release, as docs/releases.md's migration says (kubectl label and annotate)")
		samples := olmV1Samples()
		extension = samples["ClusterExtension"]
		extName := extension.GetName()
		installNamespace, _, _ := unstructured.NestedString(extension.Object, "spec", "namespace")
		Expect(installNamespace).To(Equal(namespace))
		for _, crd := range porticoCRDs {
			kubectl(ctx, "label", "crd", crd, "--overwrite", "app.kubernetes.io/managed-by=Helm")
			kubectl(ctx, "annotate", "crd", crd, "--overwrite", "meta.helm.sh/release-name="+extName, "meta.helm.sh/release-namespace="+installNamespace)
		}

		By("applying the installer ServiceAccount and its RBAC (config/olmv1/installer.yaml)")
		kubectl(ctx, "apply", "-f", filepath.Join(root, "config", "olmv1", "installer.yaml"))

		startOLMv1(ctx)

		By("publishing the catalog of " + releaseV1 + " and creating the ClusterCatalog")
		catalog = samples["ClusterCatalog"]
		Expect(unstructured.SetNestedField(catalog.Object, publishCatalog(ctx, olmOPMImage, "e2e-v1-1", releaseV1), "spec", "source", "image", "ref")).To(Succeed())
		started := time.Now()
		Expect(k8sClient.Create(ctx, catalog)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(catalog), catalog)).To(Succeed())
			status, reason, message := olmV1Condition(catalog, "Serving")
			g.Expect(status).To(Equal("True"), "ClusterCatalog Serving: %s %s", reason, message)
		}, 3*timeout, interval).Should(Succeed())
		appendReport(fmt.Sprintf("OLM v1: ClusterCatalog %s Serving in %s", catalog.GetName(), time.Since(started).Round(100*time.Millisecond)))

		By("creating the sample ClusterExtension (package " + olm.Package + ", channel " + olm.Channel + ", ServiceAccount of the installer)")
		started = time.Now()
		Expect(k8sClient.Create(ctx, extension)).To(Succeed())
		Eventually(func(g Gomega) {
			_, v := installedBundle(g, ctx, extName)
			g.Expect(v).To(Equal(strings.TrimPrefix(releaseV1, "v")))
		}, 3*timeout, interval).Should(Succeed(), "operator-controller's log: %s", filepath.Join(artifacts, "olmv1", "operator-controller.log"))
		installTook := time.Since(started)
		Eventually(func(g Gomega) { expectRunningRelease(g, releaseV1) }, 3*timeout, interval).Should(Succeed())
		readyTook := time.Since(started)
		time.Sleep(time.Second)
		traffic.Stop()
		appendReport(fmt.Sprintf("OLM v1 install of %s over OLM v0's %s: ClusterExtension to Installed %s, to APIGateway Ready on the bundle's images %s; requests while moving: %d answered, %d failed (last error: %q)",
			csvName(releaseV1), installed, installTook.Round(100*time.Millisecond), readyTook.Round(100*time.Millisecond), traffic.ok, traffic.failed, traffic.lastError))
		Expect(traffic.ok).To(BeNumerically(">", 10))

		By("checking that OLM v1 applied Portico's own grants: the operator's Role in " + namespace + ", nothing of its namespaced rules cluster-wide")
		var op appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "portico-operator"}, &op)).To(Succeed())
		Expect(op.Labels).To(HaveKeyWithValue("olm.operatorframework.io/owner-name", extName), "OLM v1 owns the operator's Deployment")
		operatorUser := "system:serviceaccount:" + namespace + ":portico-operator"
		Expect(mayListSecrets(ctx, operatorUser, namespace)).To(BeTrue(), "the operator reads Secrets in its namespace (its Role, bound without a subject namespace)")
		Expect(mayListSecrets(ctx, operatorUser, "")).To(BeFalse(), "the operator reads Secrets only in its namespace, not cluster-wide")
		Expect(mayListSecrets(ctx, operatorUser, "shop")).To(BeFalse(), "the operator reads no tenant's Secrets")

		after := objectUIDs(ctx)
		expectKept(uids, after)
		uids = after
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &gatewayv1alpha1.APIRule{})).To(Succeed())
	})

	It("upgrades through the ClusterCatalog when it lists the next release: the CRD upgrade-safety check passes, every route answers, every object is kept", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("OLM v1 installs real pods: the node target only")
		}
		Expect(extension).NotTo(BeNil(), "the OLM v1 install spec ran")
		By("publishing the catalog of " + releaseV1 + " and " + releaseV2 + " and pointing the ClusterCatalog at it")
		image := publishCatalog(ctx, olmOPMImage, "e2e-v1-2", releaseV1, releaseV2)
		traffic := startTraffic(ctx, "http://"+*gatewayIP+"/health", "orders.example.com")
		started := time.Now()
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(catalog), catalog)).To(Succeed())
		Expect(unstructured.SetNestedField(catalog.Object, image, "spec", "source", "image", "ref")).To(Succeed())
		Expect(k8sClient.Update(ctx, catalog)).To(Succeed())

		Eventually(func(g Gomega) {
			_, v := installedBundle(g, ctx, extension.GetName())
			g.Expect(v).To(Equal(strings.TrimPrefix(releaseV2, "v")))
		}, 3*timeout, interval).Should(Succeed(), "operator-controller's log: %s", filepath.Join(artifacts, "olmv1", "operator-controller.log"))
		installTook := time.Since(started)
		Eventually(func(g Gomega) { expectRunningRelease(g, releaseV2) }, 3*timeout, interval).Should(Succeed())
		readyTook := time.Since(started)
		time.Sleep(time.Second)
		traffic.Stop()

		// The upgrade ran OLM v1's preflight (CRD upgrade safety, on by
		// default): it passed, or the ClusterExtension would say so and
		// stay on the old bundle.
		ext := &unstructured.Unstructured{}
		ext.SetGroupVersionKind(clusterExtensionGVK)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(extension), ext)).To(Succeed())
		status, reason, message := olmV1Condition(ext, "Progressing")
		Expect(status).To(Equal("True"), "Progressing: %s %s", reason, message)
		Expect(reason).To(Equal("Succeeded"), message)
		logs, err := os.ReadFile(filepath.Join(artifacts, "olmv1", "operator-controller.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logs)).NotTo(ContainSubstring("CRD upgrade safety"), "no preflight refusal in operator-controller's log")

		appendReport(fmt.Sprintf("OLM v1 upgrade %s -> %s: catalog update to Installed %s, to APIGateway Ready on the new images %s; requests: %d answered, %d failed (last error: %q)",
			csvName(releaseV1), csvName(releaseV2), installTook.Round(100*time.Millisecond), readyTook.Round(100*time.Millisecond), traffic.ok, traffic.failed, traffic.lastError))
		Expect(objectUIDs(ctx)).To(Equal(uids), "no user or Istio object was lost or recreated")
		Expect(traffic.ok).To(BeNumerically(">", 10))
		Expect(traffic.failed).To(BeZero(), "requests failed during the OLM v1 upgrade: %s", traffic.lastError)
	})

	It("keeps the CRDs and users' objects when the ClusterExtension is deleted", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("OLM v1 installs real pods: the node target only")
		}
		Expect(extension).NotTo(BeNil(), "the OLM v1 install spec ran")
		ext := &unstructured.Unstructured{}
		ext.SetGroupVersionKind(clusterExtensionGVK)
		ext.SetName(extension.GetName())
		Expect(k8sClient.Delete(ctx, ext)).To(Succeed())
		Eventually(isGone(ext), 3*timeout, interval).Should(BeTrue(), "operator-controller uninstalled the release")
		Eventually(isGone(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "portico-operator"}}), 2*timeout, interval).Should(BeTrue())
		for _, name := range porticoCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed(), "%s is kept (helm.sh/resource-policy: keep)", name)
			Expect(crd.DeletionTimestamp).To(BeNil(), name)
		}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &gatewayv1alpha1.APIRule{})).To(Succeed())
		Expect(meta.IsNoMatchError(k8sClient.Get(ctx, client.ObjectKey{Name: "default"}, &operatorv1alpha1.APIGateway{}))).To(BeFalse())
	})
}
