//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/oauth2-proxy/mockoidc"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
)

// The login story's names: the tenant namespace login runs the echo
// backend (whose stand-in sidecar applies CUSTOM policies), the Service
// oauth2-proxy in front of the oauth2-proxy pods, and the APIRule
// app for the host app.example.com on the shared gateway istio-system/public.
const (
	loginNamespace = "login"
	loginHost      = "app.example.com"
	loginProvider  = "oauth2-proxy"
	loginPort      = 4180
	loginReport    = "login-report.txt"
	// meshConfigMap is where istiod reads the mesh config (key mesh).
	meshConfigMap = "istio"
)

// oauth2ProxyBuild builds oauth2-proxy (hack/oauth2proxy.sh) beside the
// node target's first specs; the login spec's own hack/oauth2proxy.sh waits
// for it (a lock) and then finds the binary built.
var oauth2ProxyBuild *framework.Process

// startOAuth2ProxyBuild starts hack/oauth2proxy.sh in the background.
func startOAuth2ProxyBuild() {
	var err error
	oauth2ProxyBuild, err = framework.StartProcess(filepath.Join(root, "hack", "oauth2proxy.sh"), nil, nil,
		filepath.Join(artifacts, "oauth2-proxy-build.log"))
	Expect(err).NotTo(HaveOccurred())
}

// The API-key story's names: tenants keys-a and keys-b each run an echo
// backend for their own host, and each has its own API-key authorizer
// (api-keys-a, api-keys-b: oauth2-proxy checking HTTP Basic credentials
// against an htpasswd file of bcrypt hashes), granted to it alone.
const (
	keysReport = "api-keys-report.txt"
)

// keyTenants are the API-key story's tenant namespaces.
var keyTenants = []string{"keys-a", "keys-b"}

// authorizerMeshConfig is the mesh config of docs/operations.md, for the
// suite's namespaces: the OIDC login provider and one API-key provider per
// key tenant, each a Service oauth2-proxy in its tenant's namespace.
func authorizerMeshConfig() string {
	var b strings.Builder
	b.WriteString("extensionProviders:\n")
	fmt.Fprintf(&b, `- name: %s
  envoyExtAuthzHttp:
    service: oauth2-proxy.%s.svc.cluster.local
    port: %d
    timeout: 5s
    includeRequestHeadersInCheck: [cookie, authorization, x-forwarded-proto, x-forwarded-host]
    headersToUpstreamOnAllow: [authorization, x-auth-request-user, x-auth-request-email]
    headersToDownstreamOnAllow: [set-cookie]
    headersToDownstreamOnDeny: [content-type, set-cookie, location]
`, loginProvider, loginNamespace, loginPort)
	for _, ns := range keyTenants {
		fmt.Fprintf(&b, `- name: api-%s
  envoyExtAuthzHttp:
    service: oauth2-proxy.%s.svc.cluster.local
    port: %d
    timeout: 5s
    includeRequestHeadersInCheck: [authorization]
    headersToUpstreamOnAllow: [x-auth-request-user]
    headersToDownstreamOnDeny: [content-type, www-authenticate]
`, ns, ns, loginPort)
	}
	return b.String()
}

// oauth2ProxyImage is the image pushOAuth2ProxyImage pushed, once.
var oauth2ProxyImage string

// pushOAuth2ProxyImage packs the oauth2-proxy binary (hack/oauth2proxy.sh,
// static) into a one-layer image that runs as a non-root user, pushes it
// to the node's registry and returns its digest reference.
func pushOAuth2ProxyImage(ctx context.Context, binary string) string {
	if oauth2ProxyImage != "" {
		return oauth2ProxyImage
	}
	data, err := os.ReadFile(binary)
	Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	Expect(tw.WriteHeader(&tar.Header{Name: "oauth2-proxy", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})).To(Succeed())
	_, err = tw.Write(data)
	Expect(err).NotTo(HaveOccurred())
	Expect(tw.Close()).To(Succeed())
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	Expect(err).NotTo(HaveOccurred())
	img, err := mutate.AppendLayers(empty.Image, layer)
	Expect(err).NotTo(HaveOccurred())
	cf, err := img.ConfigFile()
	Expect(err).NotTo(HaveOccurred())
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	cf.Config.Entrypoint = []string{"/oauth2-proxy"}
	cf.Config.User = "65532:65532"
	img, err = mutate.ConfigFile(img, cf)
	Expect(err).NotTo(HaveOccurred())
	tag, err := name.NewTag(registryRepo+"/oauth2-proxy:e2e", name.Insecure)
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(tag, img, remote.WithContext(ctx))).To(Succeed())
	digest, err := img.Digest()
	Expect(err).NotTo(HaveOccurred())
	oauth2ProxyImage = tag.Context().Digest(digest.String()).String()
	return oauth2ProxyImage
}

// deployOAuth2Proxy runs oauth2-proxy in namespace ns behind the Service
// oauth2-proxy (port 4180), as the OIDC client of the mock provider, in
// the mode Istio's ext_authz guides use: a request with a session is
// answered 200 with the identity headers (the sidecar then lets the
// original through), one without is redirected to the provider's login.
// extra are more flags; files, when set, are mounted from a Secret at
// /etc/oauth2-proxy (the API-key instances' htpasswd).
func deployOAuth2Proxy(ctx context.Context, ns, image string, oidc *mockoidc.MockOIDC, files map[string]string, extra ...string) {
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	args := append([]string{
		"--http-address", "0.0.0.0:" + strconv.Itoa(loginPort),
		"--provider", "oidc",
		"--oidc-issuer-url", oidc.Issuer(),
		"--client-id", oidc.ClientID,
		"--client-secret", oidc.ClientSecret,
		"--cookie-secret", hex.EncodeToString(secret),
		"--cookie-name", "_oauth2_proxy_" + strings.ReplaceAll(ns, "-", "_"),
		// The browser speaks plain HTTP to the gateway here.
		"--cookie-secure=false",
		"--email-domain", "*",
		"--upstream", "static://200",
		"--set-xauthrequest",
	}, extra...)
	labels := map[string]string{"app": "oauth2-proxy"}
	c := restricted("oauth2-proxy", args...)
	c.Image = image
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: loginPort}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ping", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	pod := corev1.PodSpec{
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532)},
	}
	if len(files) > 0 {
		createOrExisting(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oauth2-proxy-files", Namespace: ns}, StringData: files})
		pod.Volumes = []corev1.Volume{{Name: "files", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "oauth2-proxy-files"}}}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "files", MountPath: "/etc/oauth2-proxy", ReadOnly: true}}
	}
	pod.Containers = []corev1.Container{c}
	createOrExisting(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "oauth2-proxy", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	})
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "oauth2-proxy"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}, timeout, interval).Should(Succeed(), "oauth2-proxy in %s is ready", ns)
}

// browser is a client with a cookie jar that reaches app.example.com at the
// gateway stand-in's pod and everything else (the OIDC provider) directly;
// it follows no redirect by itself, so the story can count every hop.
type browser struct {
	c *http.Client
	// requests counts what the browser sent.
	requests int
}

func newBrowser(gateway string) *browser {
	jar, err := cookiejar.New(nil)
	Expect(err).NotTo(HaveOccurred())
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &browser{c: &http.Client{
		Jar:     jar,
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == loginHost+":80" {
				addr = net.JoinHostPort(gateway, "8080")
			}
			return dialer.DialContext(ctx, network, addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends GET target with headers; it returns the status, the Location
// and the body.
func (b *browser) do(ctx context.Context, target string, headers map[string]string) (int, string, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	b.requests++
	resp, err := b.c.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body), err
}

// get is do that must get an answer; `kubectl portico explain` of a
// request to the tenant's host must agree with it (explain_test.go).
func (b *browser) get(ctx context.Context, target string, headers map[string]string) (int, string, string) {
	status, location, body, err := b.do(ctx, target, headers)
	Expect(err).NotTo(HaveOccurred())
	compareAuthorized(ctx, "login", target, headers, status)
	return status, location, body
}

// login follows the login from a redirect to the provider's authorize
// endpoint: the provider logs the queued user in and sends the browser to
// the callback, where oauth2-proxy sets the session and sends it back to
// the page first asked for. It returns that page's location.
func (b *browser) login(ctx context.Context, authorize string) string {
	status, callback, body := b.get(ctx, authorize, nil)
	Expect(status).To(Equal(http.StatusFound), "the provider's authorize endpoint: %s", body)
	Expect(callback).To(HavePrefix("http://"+loginHost+"/oauth2/callback?"), "the provider redirects to oauth2-proxy's callback through the gateway")
	status, back, body := b.get(ctx, callback, nil)
	Expect(status).To(Equal(http.StatusFound), "the callback: %s", body)
	return back
}

// deployAuthorizedBackend runs in namespace ns the echo backend whose
// stand-in sidecar applies the CUSTOM policies selecting it, with the
// mesh config's providers (ConfigMap istio-system/istio), and the Service
// oauth2-proxy for the authorizer's pods (deployOAuth2Proxy).
func deployAuthorizedBackend(ctx context.Context, ns string) {
	createOrExisting(ctx, restrictedNamespace(ns))
	createOrExisting(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}})
	createOrExisting(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-sidecar"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"security.istio.io"}, Resources: []string{"authorizationpolicies"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
		},
	})
	createOrExisting(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-sidecar-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-e2e-sidecar"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "echo", Namespace: ns}},
	})
	// The mesh config, as istiod reads it; the sidecar stand-in may read
	// that ConfigMap and no other.
	createOrExisting(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-mesh-config", Namespace: gatewayNamespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{meshConfigMap}, Verbs: []string{"get"}}},
	})
	createOrExisting(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-mesh-config-" + ns, Namespace: gatewayNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "portico-e2e-mesh-config"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "echo", Namespace: ns}},
	})
	createOrExisting(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: meshConfigMap, Namespace: gatewayNamespace},
		Data:       map[string]string{"mesh": authorizerMeshConfig()},
	})
	labels := map[string]string{"app": "echo"}
	createOrExisting(ctx, agentDeployment(ns, "echo", labels, "echo", "backend", "--name", "echo",
		"--workload-namespace", ns, "--workload-labels", "app=echo", "--mesh-config", gatewayNamespace+"/"+meshConfigMap))
	createOrExisting(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	})
	createOrExisting(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "oauth2-proxy", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "oauth2-proxy"},
			Ports: []corev1.ServicePort{{Name: "http", Port: loginPort}}},
	})
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "echo"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}, timeout, interval).Should(Succeed())
}

// removeAuthorizedBackend deletes what deployAuthorizedBackend wrote for ns
// (the shared ClusterRole, Role and mesh ConfigMap stay for the next). The
// namespace's APIRules go first, and are waited for, so that no Istio
// object of the story changes under a later spec (the upgrade spec
// compares every APIRule's and Istio object's version).
func removeAuthorizedBackend(ctx context.Context, ns string) {
	removeAPIRules(ctx, ns)
	_ = k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	_ = k8sClient.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-sidecar-" + ns}})
	_ = k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-mesh-config-" + ns, Namespace: gatewayNamespace}})
}

// removeAPIRules deletes the APIRules of namespace ns and waits until the
// apirule controller has removed their objects (and its finalizer).
func removeAPIRules(ctx context.Context, ns string) {
	Expect(client.IgnoreNotFound(k8sClient.DeleteAllOf(ctx, &gatewayv1alpha1.APIRule{}, client.InNamespace(ns)))).To(Succeed())
	Eventually(func(g Gomega) {
		var rules gatewayv1alpha1.APIRuleList
		g.Expect(k8sClient.List(ctx, &rules, client.InNamespace(ns))).To(Succeed())
		g.Expect(rules.Items).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// grantAuthorizer grants the authorizer name to namespace ns in the
// APIGateway; the spec's cleanup withdraws it.
func grantAuthorizer(name, ns string) {
	updateGateway(func(gw *operatorv1alpha1.APIGateway) {
		if gw.Spec.APIRules == nil {
			gw.Spec.APIRules = &operatorv1alpha1.APIRulesSpec{}
		}
		gw.Spec.APIRules.ExtAuthProviders = append(gw.Spec.APIRules.ExtAuthProviders,
			operatorv1alpha1.ExtAuthProviderGrant{Name: name, Namespaces: []string{ns}})
	})
	DeferCleanup(func() {
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.APIRules.ExtAuthProviders = slices.DeleteFunc(gw.Spec.APIRules.ExtAuthProviders,
				func(g operatorv1alpha1.ExtAuthProviderGrant) bool { return g.Name == name })
		})
	})
}

// expectAPIRuleReason waits for the APIRule's Ready reason (Applied when
// reason is "").
func expectAPIRuleReason(key client.ObjectKey, reason string) {
	Eventually(func(g Gomega) {
		ready := apiRuleReady(g, key)
		if reason == "" {
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			return
		}
		g.Expect(ready.Reason).To(Equal(reason))
	}, timeout, interval).Should(Succeed())
}

// loginAPIRule is the tenant's APIRule: oauth2-proxy's own endpoints under
// /oauth2/ open to everyone (the login must be reachable), everything else
// decided by the granted authorizer.
func loginAPIRule() *gatewayv1alpha1.APIRule {
	return &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: loginNamespace},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts: []gatewayv1alpha1.Hostname{loginHost}, Gateway: gatewayNamespace + "/public",
			Service: &gatewayv1alpha1.ServiceReference{Name: "echo", Port: 8080},
			Rules: []gatewayv1alpha1.Rule{
				{Path: "/oauth2/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET", "POST"}, NoAuth: ptr.To(true),
					Service: &gatewayv1alpha1.ServiceReference{Name: "oauth2-proxy", Port: loginPort}},
				{Path: "/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, ExtAuth: &gatewayv1alpha1.ExtAuth{Authorizers: []string{loginProvider}}},
			},
		},
	}
}

// gatewayPodIP is the address of the shared gateway stand-in's pod.
func gatewayPodIP(ctx context.Context) string {
	var ip string
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(gatewayNamespace), client.MatchingLabels{"istio": "ingressgateway"})).To(Succeed())
		ip = ""
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning {
				ip = p.Status.PodIP
			}
		}
		g.Expect(ip).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	return ip
}

// echoedHeader is a header's line in the echo backend's answer to a
// request with X-Echo-Headers ("" when it did not receive it).
func echoedHeader(body, name string) string {
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// loginSpecs are the story of OIDC login through a granted authorizer, on
// real parts: mockoidc (a mock OIDC provider, in the suite's process on the
// node) and oauth2-proxy (hack/oauth2proxy.sh, pods of the tenant) as the
// mesh's envoyExtAuthzHttp provider; the tenant's APIRule opens
// oauth2-proxy's /oauth2/ endpoints and hands the rest of its host to the
// authorizer; the shared gateway stand-in routes, the echo backend's
// sidecar stand-in asks oauth2-proxy as Envoy's ext_authz filter does.
// Counts go to e2e/_artifacts/login-report.txt. The node target only.
func loginSpecs() {
	It("logs a browser in with OIDC through oauth2-proxy once the administrator grants it, passes its identity headers over forged ones, and logs out", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("oauth2-proxy and the OIDC provider run on the node target's host")
		}
		image, oidc := startAuthorizerParts(ctx)
		deployAuthorizedBackend(ctx, loginNamespace)
		deployOAuth2Proxy(ctx, loginNamespace, image, oidc, nil,
			"--redirect-url", "http://"+loginHost+"/oauth2/callback", "--skip-provider-button", "--set-authorization-header")
		DeferCleanup(func(ctx SpecContext) {
			removeAuthorizedBackend(ctx, loginNamespace)
			removeAPIRules(ctx, "intruder")
			_ = k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}})
			_ = k8sClient.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: meshConfigMap, Namespace: gatewayNamespace}})
		})

		By("refusing the tenant's APIRule while the authorizer is not granted to its namespace")
		rule := loginAPIRule()
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		expectAPIRuleReason(client.ObjectKeyFromObject(rule), gatewayv1alpha1.ReasonAuthorizerNotPermitted)

		By("applying it once the administrator grants oauth2-proxy to namespace login (and nobody else)")
		grantAuthorizer(loginProvider, loginNamespace)
		expectAPIRuleReason(client.ObjectKeyFromObject(rule), "")

		By("refusing another tenant's APIRule that names the authorizer granted to login only")
		createOrExisting(ctx, restrictedNamespace("intruder"))
		intruder := loginAPIRule()
		intruder.Namespace = "intruder"
		intruder.Spec.Hosts = []gatewayv1alpha1.Hostname{"intruder.example.com"}
		Expect(k8sClient.Create(ctx, intruder)).To(Succeed())
		expectAPIRuleReason(client.ObjectKeyFromObject(intruder), gatewayv1alpha1.ReasonAuthorizerNotPermitted)

		loginStory(ctx, oidc)
	})

	It("accepts a tenant's API keys on its own API only: a valid key passes with its client's identity, a wrong, missing or other tenant's key is refused", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("the API-key authorizers run on the node target's host")
		}
		image, oidc := startAuthorizerParts(ctx)
		keys := map[string]apiKey{}
		for _, ns := range keyTenants {
			key := newAPIKey(ns)
			keys[ns] = key
			deployAuthorizedBackend(ctx, ns)
			DeferCleanup(func(ctx SpecContext) { removeAuthorizedBackend(ctx, ns) })
			deployOAuth2Proxy(ctx, ns, image, oidc, map[string]string{"htpasswd": htpasswd(key)},
				"--htpasswd-file", "/etc/oauth2-proxy/htpasswd", "--force-json-errors")
		}
		DeferCleanup(func(ctx SpecContext) {
			_ = k8sClient.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: meshConfigMap, Namespace: gatewayNamespace}})
		})
		for _, ns := range keyTenants {
			grantAuthorizer("api-"+ns, ns)
		}

		By("refusing keys-b's APIRule naming keys-a's authorizer; applying each tenant's own")
		stolen := keysAPIRule("keys-b", "api-keys-a")
		stolen.Name = "stolen"
		stolen.Spec.Hosts = []gatewayv1alpha1.Hostname{"stolen.keys.example.com"}
		Expect(k8sClient.Create(ctx, stolen)).To(Succeed())
		expectAPIRuleReason(client.ObjectKeyFromObject(stolen), gatewayv1alpha1.ReasonAuthorizerNotPermitted)
		Expect(k8sClient.Delete(ctx, stolen)).To(Succeed())
		for _, ns := range keyTenants {
			rule := keysAPIRule(ns, "api-"+ns)
			Expect(k8sClient.Create(ctx, rule)).To(Succeed())
			expectAPIRuleReason(client.ObjectKeyFromObject(rule), "")
		}

		apiKeyStory(ctx, keys)
	})
}

// startAuthorizerParts builds oauth2-proxy (or waits for the suite's
// build) and pushes its image, and starts a mock OIDC provider on the
// node's address (where pods reach the suite); it returns the image and
// the provider.
func startAuthorizerParts(ctx context.Context) (string, *mockoidc.MockOIDC) {
	out, err := framework.Run(ctx, root, "hack/oauth2proxy.sh")
	Expect(err).NotTo(HaveOccurred(), out)
	node := nodeAddress(ctx)
	ln, err := net.Listen("tcp", net.JoinHostPort(node, "0"))
	Expect(err).NotTo(HaveOccurred())
	oidc, err := mockoidc.NewServer(nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(oidc.Start(ln, nil)).To(Succeed())
	DeferCleanup(func() { _ = oidc.Shutdown() })
	return pushOAuth2ProxyImage(ctx, framework.LastLine(out)), oidc
}

// loginStory is the browser's part of the login story.
func loginStory(ctx context.Context, oidc *mockoidc.MockOIDC) {
	page := "http://" + loginHost + "/profile"
	b := newBrowser(gatewayPodIP(ctx))
	echo := map[string]string{"X-Echo-Headers": "1"}

	By("redirecting a browser without a session to the provider's login, with the backend never reached")
	var authorize string
	Eventually(func(g Gomega) {
		status, location, body, err := b.do(ctx, page, echo)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusFound), body)
		g.Expect(location).To(HavePrefix(oidc.AuthorizationEndpoint()))
		g.Expect(body).NotTo(ContainSubstring("echo GET"))
		authorize = location
	}, timeout, interval).Should(Succeed())
	reportTo(loginReport, "no session: %s answered 302 to the provider's authorize endpoint (%d requests until the routes and policies were in place)", page, b.requests)

	By("refusing forged identity headers and a forged session cookie without a session")
	forged := map[string]string{
		"X-Echo-Headers": "1", "X-Auth-Request-User": "admin", "X-Auth-Request-Email": "admin@example.com",
		"Authorization": "Bearer forged", "Cookie": "_oauth2_proxy_" + loginNamespace + "=forged",
	}
	status, location, body := b.get(ctx, page, forged)
	Expect(status).To(Equal(http.StatusFound), body)
	Expect(location).To(HavePrefix(oidc.AuthorizationEndpoint()))
	Expect(body).NotTo(ContainSubstring("echo GET"))
	// Every redirect to the login sets a new CSRF cookie, which the
	// callback checks against the state of that redirect: the login
	// starts from the last one.
	authorize = location
	reportTo(loginReport, "attack: no session, forged X-Auth-Request-User/Email, Authorization and session cookie: 302 to login, the backend not reached")

	By("logging in at the provider: the callback sets the session and returns to the page")
	user := &mockoidc.MockUser{Subject: "ada-7", Email: "ada@example.com", EmailVerified: true, PreferredUsername: "ada"}
	oidc.QueueUser(user)
	before := b.requests
	back := b.login(ctx, authorize)
	Expect(back).To(Or(Equal("/profile"), Equal(page)))
	status, _, body = b.get(ctx, page, echo)
	Expect(status).To(Equal(http.StatusOK), body)
	Expect(body).To(HavePrefix("echo GET /profile"))
	Expect(echoedHeader(body, "X-Auth-Request-Email")).To(Equal(user.Email))
	Expect(echoedHeader(body, "X-Auth-Request-User")).NotTo(BeEmpty())
	Expect(echoedHeader(body, "Authorization")).To(HavePrefix("Bearer "))
	reportTo(loginReport, "login: %d requests (authorize, callback, page): the backend saw X-Auth-Request-User %q, X-Auth-Request-Email %q and oauth2-proxy's bearer token",
		b.requests-before, echoedHeader(body, "X-Auth-Request-User"), echoedHeader(body, "X-Auth-Request-Email"))

	By("replacing the identity headers a logged-in client forges with the authorizer's")
	delete(forged, "Cookie")
	forged["X-Auth-Request-Groups"] = "admins"
	forged["X_Auth_Request_User"] = "admin"
	status, _, body = b.get(ctx, page, forged)
	Expect(status).To(Equal(http.StatusOK), body)
	Expect(echoedHeader(body, "X-Auth-Request-Email")).To(Equal(user.Email))
	Expect(echoedHeader(body, "X-Auth-Request-User")).To(Equal(user.Subject))
	Expect(echoedHeader(body, "Authorization")).To(HavePrefix("Bearer "))
	Expect(echoedHeader(body, "Authorization")).NotTo(Equal("Bearer forged"))
	reportTo(loginReport, "attack: session plus forged X-Auth-Request-User/Email and Authorization: the backend saw the authorizer's values (user %q, email %q, oauth2-proxy's token)",
		echoedHeader(body, "X-Auth-Request-User"), echoedHeader(body, "X-Auth-Request-Email"))
	// What the mesh config does not forward is the client's: a header the
	// authorizer does not answer with (no groups for this user) or another
	// spelling reaches the backend as sent (docs/threat-model.md §21).
	reportTo(loginReport, "not the authorizer's (as Envoy does): the forged X-Auth-Request-Groups reached the backend as %q, X_Auth_Request_User as %q",
		echoedHeader(body, "X-Auth-Request-Groups"), echoedHeader(body, "X_Auth_Request_User"))

	By("logging out: the session is gone and the page asks for a login again")
	status, _, body = b.get(ctx, "http://"+loginHost+"/oauth2/sign_out", nil)
	Expect(status).To(Equal(http.StatusFound), body)
	status, location, body = b.get(ctx, page, echo)
	Expect(status).To(Equal(http.StatusFound), body)
	Expect(location).To(HavePrefix(oidc.AuthorizationEndpoint()))
	reportTo(loginReport, "logout: /oauth2/sign_out 302, then %s 302 to the provider again; %d browser requests in all", page, b.requests)
}

// apiKey is one API client's credentials: HTTP Basic, the client's name
// as the user and the key as the password.
type apiKey struct{ client, secret string }

func newAPIKey(ns string) apiKey {
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	return apiKey{client: "client-of-" + ns, secret: hex.EncodeToString(buf)}
}

// htpasswd is the API-key authorizer's htpasswd file: the key's bcrypt
// hash, never the key.
func htpasswd(key apiKey) string {
	hash, err := bcrypt.GenerateFromPassword([]byte(key.secret), bcrypt.DefaultCost)
	Expect(err).NotTo(HaveOccurred())
	return key.client + ":" + string(hash) + "\n"
}

// keysAPIRule is tenant ns's API at <ns>.keys.example.com, every GET
// decided by authorizer.
func keysAPIRule(ns, authorizer string) *gatewayv1alpha1.APIRule {
	return &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts: []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(ns + ".keys.example.com")}, Gateway: gatewayNamespace + "/public",
			Service: &gatewayv1alpha1.ServiceReference{Name: "echo", Port: 8080},
			Rules: []gatewayv1alpha1.Rule{
				{Path: "/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, ExtAuth: &gatewayv1alpha1.ExtAuth{Authorizers: []string{authorizer}}},
			},
		},
	}
}

// apiKeyStory sends each tenant's API its own key, a wrong one, none, the
// other tenant's, and its own with a forged identity header.
func apiKeyStory(ctx context.Context, keys map[string]apiKey) {
	gateway := net.JoinHostPort(gatewayPodIP(ctx), "8080")
	c := &http.Client{Timeout: 10 * time.Second}
	send := func(ns string, user, secret string, extra map[string]string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gateway+"/orders", nil)
		if err != nil {
			return 0, "", err
		}
		req.Host = ns + ".keys.example.com"
		req.Header.Set("X-Echo-Headers", "1")
		if user != "" {
			req.SetBasicAuth(user, secret)
		}
		for k, v := range extra {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	requests := 0
	for _, ns := range keyTenants {
		own, other := keys[ns], keys[otherTenant(ns)]
		By("passing " + ns + "'s own key with its client's identity")
		Eventually(func(g Gomega) {
			requests++
			status, body, err := send(ns, own.client, own.secret, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), body)
			g.Expect(body).To(HavePrefix("echo GET /orders"))
			g.Expect(echoedHeader(body, "X-Auth-Request-User")).To(Equal(own.client))
		}, timeout, interval).Should(Succeed())
		cases := []struct {
			what         string
			user, secret string
		}{
			{"a wrong key", own.client, own.secret + "0"},
			{"no key", "", ""},
			{"the other tenant's key", other.client, other.secret},
			{"the other tenant's key under its own client's name", own.client, other.secret},
		}
		for _, tc := range cases {
			requests++
			status, body, err := send(ns, tc.user, tc.secret, nil)
			Expect(err).NotTo(HaveOccurred())
			compareAuthorized(ctx, "API keys", "http://"+ns+".keys.example.com/orders", map[string]string{"X-Echo-Headers": "1"}, status)
			Expect(status).To(Equal(http.StatusUnauthorized), "%s on %s: %s", tc.what, ns, body)
			Expect(body).NotTo(ContainSubstring("echo GET"))
			reportTo(keysReport, "attack: %s on %s's API: %d, the backend not reached", tc.what, ns, status)
		}
		requests++
		status, body, err := send(ns, own.client, own.secret, map[string]string{"X-Auth-Request-User": other.client})
		Expect(err).NotTo(HaveOccurred())
		compareAuthorized(ctx, "API keys", "http://"+ns+".keys.example.com/orders", map[string]string{"X-Echo-Headers": "1", "X-Auth-Request-User": other.client}, status)
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(echoedHeader(body, "X-Auth-Request-User")).To(Equal(own.client))
		reportTo(keysReport, "attack: %s's own key with X-Auth-Request-User forged as %s: the backend saw %q", ns, other.client, echoedHeader(body, "X-Auth-Request-User"))
	}
	reportTo(keysReport, "API keys: %d requests over %d tenants' APIs", requests, len(keyTenants))
}

// otherTenant is the key tenant that is not ns.
func otherTenant(ns string) string {
	if ns == keyTenants[0] {
		return keyTenants[1]
	}
	return keyTenants[0]
}
