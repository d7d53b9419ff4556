//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

// The Gateway API story's names: Traefik serves the GatewayClass e2e and
// runs as ServiceAccount traefik/traefik; the Gateway traefik/web is the
// APIRules' parent; a Service of namespace warehouse is the cross-namespace
// backend.
const (
	traefikNamespace      = "traefik"
	traefikClass          = "e2e"
	traefikGatewayName    = "web"
	traefikControllerName = "traefik.io/gateway-controller"
	warehouseNamespace    = "warehouse"
	stockHost             = "stock.example.com"
)

// traefik is the Traefik host process; AfterSuite stops it if a spec did not.
var traefik *framework.Process

// traefikBuild builds Traefik (hack/traefik.sh) beside the node target's
// first specs; the Gateway API specs' own hack/traefik.sh waits for it (a
// lock) and then finds the binary built.
var traefikBuild *framework.Process

// startTraefikBuild starts hack/traefik.sh in the background.
func startTraefikBuild() {
	var err error
	traefikBuild, err = framework.StartProcess(filepath.Join(root, "hack", "traefik.sh"), nil, nil,
		filepath.Join(artifacts, "traefik-build.log"))
	Expect(err).NotTo(HaveOccurred())
}

// gatewayAPIReport adds a line to e2e/_artifacts/gateway-api-report.txt.
func gatewayAPIReport(format string, args ...any) {
	reportTo("gateway-api-report.txt", format, args...)
}

// apiRuleReady is the APIRule's Ready condition.
func apiRuleReady(g Gomega, key client.ObjectKey) metav1.Condition {
	r := &gatewayv1alpha1.APIRule{}
	g.Expect(k8sClient.Get(context.Background(), key, r)).To(Succeed())
	ready := apimeta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil(), "APIRule %s has a Ready condition", key)
	g.Expect(ready.ObservedGeneration).To(Equal(r.Generation), "APIRule %s: Ready describes the current spec", key)
	return *ready
}

// expectRouteAcceptedByTraefik checks that Traefik accepted the HTTPRoute
// named key on the Gateway traefik/web with its references resolved.
func expectRouteAcceptedByTraefik(g Gomega, key client.ObjectKey) {
	route := &gatewayapiv1.HTTPRoute{}
	g.Expect(k8sClient.Get(context.Background(), key, route)).To(Succeed())
	g.Expect(route.Status.Parents).To(HaveLen(1), "HTTPRoute %s: one parent status", key)
	parent := route.Status.Parents[0]
	g.Expect(string(parent.ControllerName)).To(Equal(traefikControllerName))
	g.Expect(string(parent.ParentRef.Name)).To(Equal(traefikGatewayName))
	for _, t := range []gatewayapiv1.RouteConditionType{gatewayapiv1.RouteConditionAccepted, gatewayapiv1.RouteConditionResolvedRefs} {
		c := apimeta.FindStatusCondition(parent.Conditions, string(t))
		g.Expect(c).NotTo(BeNil(), "HTTPRoute %s: %s", key, t)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "HTTPRoute %s: %s %s: %s", key, t, c.Reason, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(route.Generation))
	}
}

// throughTraefik sends method path to Traefik's entrypoint addr with Host
// host and returns the status code and the body; `kubectl portico explain`
// of the request in HTTPRoute mode must agree (explain_test.go).
func throughTraefik(g Gomega, addr, method, host, path string) (int, string) {
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Host = host
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	_, port, err := net.SplitHostPort(addr)
	g.Expect(err).NotTo(HaveOccurred())
	compareExplained(context.Background(), g, "HTTPRoute mode through Traefik", resp.StatusCode, false,
		"--parent", traefikNamespace+"/"+traefikGatewayName, "--port", port, "--host", host, "--path", path, "--method", method)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// installGatewayAPI creates the Gateway API's standard CRDs (the
// sigs.k8s.io/gateway-api module's) and waits until they are Established.
func installGatewayAPI(ctx context.Context) {
	crds, err := testenv.GatewayAPIStandardCRDs()
	Expect(err).NotTo(HaveOccurred())
	for _, crd := range crds {
		createOrExisting(ctx, crd)
	}
	for _, crd := range crds {
		Eventually(func(g Gomega) {
			live := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), live)).To(Succeed())
			established := false
			for _, c := range live.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(established).To(BeTrue(), "%s is Established", crd.Name)
		}, timeout, interval).Should(Succeed())
	}
}

// traefikIdentity creates the ServiceAccount traefik/traefik with what
// Traefik's Gateway API provider reads and writes, in the namespaces it
// watches only (its informers list and watch; it updates statuses), and
// returns a token of it (TokenRequest, one hour).
func traefikIdentity(ctx context.Context, namespaces []string) string {
	createOrExisting(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "traefik", Namespace: traefikNamespace}})
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "traefik", Namespace: traefikNamespace}}
	watch := []string{"list", "watch"}
	createOrExisting(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik-cluster"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: watch},
			{APIGroups: []string{gatewayv1alpha1.GatewayAPIGroup}, Resources: []string{"gatewayclasses"}, Verbs: watch},
			{APIGroups: []string{gatewayv1alpha1.GatewayAPIGroup}, Resources: []string{"gatewayclasses/status"}, Verbs: []string{"update"}},
		},
	})
	createOrExisting(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik-cluster"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-e2e-traefik-cluster"},
		Subjects:   subjects,
	})
	routes := []string{"gateways", "httproutes", "grpcroutes", "tlsroutes", "backendtlspolicies"}
	statuses := make([]string, 0, len(routes))
	for _, r := range routes {
		statuses = append(statuses, r+"/status")
	}
	createOrExisting(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "secrets", "configmaps"}, Verbs: watch},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: watch},
			{APIGroups: []string{gatewayv1alpha1.GatewayAPIGroup}, Resources: append(routes, "referencegrants"), Verbs: watch},
			{APIGroups: []string{gatewayv1alpha1.GatewayAPIGroup}, Resources: statuses, Verbs: []string{"update"}},
		},
	})
	for _, ns := range namespaces {
		createOrExisting(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-e2e-traefik"},
			Subjects:   subjects,
		})
	}
	token, err := clientset.CoreV1().ServiceAccounts(traefikNamespace).CreateToken(ctx, "traefik",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return token.Status.Token
}

// startTraefik runs Traefik (built by hack/traefik.sh) as a host process
// with the ServiceAccount traefik/traefik's token, watching namespaces,
// with one entrypoint on addr (127.0.0.1:port: a Gateway listener of port
// port is served there), and the Gateway API provider only.
func startTraefik(ctx context.Context, addr string, namespaces []string) {
	out, err := framework.Run(ctx, root, "hack/traefik.sh")
	Expect(err).NotTo(HaveOccurred())
	binary := framework.LastLine(out)
	token := traefikIdentity(ctx, namespaces)
	dir := filepath.Join(artifacts, "traefik")
	Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	Expect(os.WriteFile(tokenFile, []byte(token), 0o600)).To(Succeed())
	ca := restConfig.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(restConfig.CAFile)
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(os.WriteFile(caFile, ca, 0o600)).To(Succeed())
	traefik, err = framework.StartProcess(binary, []string{
		"--global.checknewversion=false", "--global.sendanonymoususage=false", "--log.level=INFO", "--log.nocolor=true",
		"--entrypoints.web.address=" + addr,
		"--providers.kubernetesgateway=true",
		"--providers.kubernetesgateway.endpoint=" + restConfig.Host,
		"--providers.kubernetesgateway.token=" + tokenFile,
		"--providers.kubernetesgateway.certauthfilepath=" + caFile,
		"--providers.kubernetesgateway.namespaces=" + strings.Join(namespaces, ","),
		"--providers.kubernetesgateway.statusaddress.ip=127.0.0.1",
		// No 2 s delay between a change and the configuration it makes.
		"--providers.providersthrottleduration=0s",
	}, []string{
		// Else Traefik would prefer an in-cluster or kubeconfig client.
		"KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=",
	}, filepath.Join(artifacts, "traefik.log"))
	Expect(err).NotTo(HaveOccurred())
}

// gatewayAPISpecs are the story of HTTPRoute mode with a real Gateway API
// implementation: the cluster administrator installs the Gateway API's
// standard CRDs while Portico runs, and runs Traefik (v3.7, built from its
// Go module by hack/traefik.sh) as the gateway of the GatewayClass e2e,
// with a Gateway traefik/web; the APIRule sample (orders, passed in) with
// spec.parentRef naming that Gateway instead of an Istio Gateway becomes an
// HTTPRoute, is Ready only once Traefik accepts the route, and Traefik
// routes its hosts and paths to the orders backend; a Service of another
// namespace is routed to only with a ReferenceGrant of that namespace.
// Traefik's requests are sent from the host to its entrypoint on
// 127.0.0.1; it reaches the backend pods at their IPs. No Istio data plane
// runs, so the access policies on the backends are written but not
// enforced here (HTTPRoute mode's policies are those of Istio mode, which
// the envtest suites check).
//
// Call it inside the Portico Describe (an Ordered container), on a cluster
// where the apirule controller runs without the Gateway API's CRDs and the
// orders backend runs behind the Service shop/orders, as after "routes a
// request from a pod through the APIRule's VirtualService to its Service"
// (the suite calls it after the helm upgrade and rollback).
// The specs run on the node target only and leave the Gateway API's CRDs
// installed, and nothing else of theirs: Traefik is stopped (AfterSuite
// stops it too, if a spec failed), and the APIRules, Gateway, GatewayClass,
// the namespaces traefik and warehouse and the RBAC are deleted. Timings go
// to e2e/_artifacts/gateway-api-report.txt.
func gatewayAPISpecs(sample *gatewayv1alpha1.APIRule) {
	// traefikAddr is Traefik's entrypoint, whose port is the Gateway's
	// listener port.
	var traefikAddr string
	parent := &gatewayv1alpha1.ParentReference{Namespace: traefikNamespace, Name: traefikGatewayName}
	// The sample with parentRef instead of gateway, on a host of its own
	// (the sample's is owned by the Istio-mode APIRule).
	orders := sample.DeepCopy()
	orders.Name = sample.Name + "-gateway-api"
	orders.Spec.Hosts = []gatewayv1alpha1.Hostname{"orders-gateway-api.example.com"}
	orders.Spec.Gateway = ""
	orders.Spec.ParentRef = parent
	ordersHost := string(orders.Spec.Hosts[0])
	// stock routes to the Service warehouse/stock.
	stock := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "stock", Namespace: "shop"},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:     []gatewayv1alpha1.Hostname{stockHost},
			ParentRef: parent,
			Service:   &gatewayv1alpha1.ServiceReference{Name: "stock", Namespace: warehouseNamespace, Port: 8080},
			Rules:     []gatewayv1alpha1.Rule{{Path: "/stock/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}},
		},
	}
	watched := []string{traefikNamespace, "shop", warehouseNamespace}
	skipUnlessNode := func() {
		if target != framework.TargetNode {
			Skip("the Gateway API specs run on the node target: Traefik routes to real pods")
		}
	}

	It("waits for the Gateway API's CRDs, installed while it runs, then for the Gateway's controller: RoutePending, not Ready", func(ctx SpecContext) {
		skipUnlessNode()
		By("running the backend of the other namespace, warehouse/stock, meanwhile")
		createOrExisting(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: warehouseNamespace}})
		createOrExisting(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: traefikNamespace}})
		createOrExisting(ctx, agentDeployment(warehouseNamespace, "stock", map[string]string{"app": "stock"}, "default", "backend", "--name", "stock"))
		createOrExisting(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "stock", Namespace: warehouseNamespace},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "stock"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		})

		Expect(k8sClient.Create(ctx, orders.DeepCopy())).To(Succeed())
		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(orders))
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonGatewayAPINotInstalled), ready.Message)
		}, timeout, interval).Should(Succeed())

		By("installing the Gateway API's standard CRDs while the apirule controller runs")
		restarts := apiRuleControllerRestarts(ctx)
		Expect(restarts).NotTo(BeEmpty(), "the apirule controller runs")
		started := time.Now()
		installGatewayAPI(ctx)
		port := freePort()
		traefikAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		Expect(k8sClient.Create(ctx, &gatewayapiv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: traefikClass},
			Spec:       gatewayapiv1.GatewayClassSpec{ControllerName: traefikControllerName},
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &gatewayapiv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: traefikGatewayName, Namespace: traefikNamespace},
			Spec: gatewayapiv1.GatewaySpec{
				GatewayClassName: traefikClass,
				Listeners: []gatewayapiv1.Listener{{
					// Traefik serves a listener on the entrypoint of its port.
					Name: "http", Protocol: gatewayapiv1.HTTPProtocolType, Port: port,
					AllowedRoutes: &gatewayapiv1.AllowedRoutes{Namespaces: &gatewayapiv1.RouteNamespaces{From: ptr.To(gatewayapiv1.NamespacesFromAll)}},
				}},
			},
		})).To(Succeed())

		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(orders))
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonRoutePending), ready.Message)
			route := &gatewayapiv1.HTTPRoute{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(orders), route)).To(Succeed())
			g.Expect(route.Spec.Hostnames).To(Equal([]gatewayapiv1.Hostname{gatewayapiv1.Hostname(ordersHost)}))
			g.Expect(route.Spec.Rules).To(HaveLen(2))
		}, timeout, interval).Should(Succeed())
		gatewayAPIReport("APIRule %s: RoutePending %s after installing the Gateway API's CRDs",
			client.ObjectKeyFromObject(orders), time.Since(started).Round(100*time.Millisecond))
		Consistently(func(g Gomega) {
			g.Expect(apiRuleReady(g, client.ObjectKeyFromObject(orders)).Reason).To(Equal(gatewayv1alpha1.ReasonRoutePending))
		}, 2*time.Second, interval).Should(Succeed(), "no controller serves the GatewayClass yet: nothing accepts the route")

		By("checking that the apirule controller took the CRDs up without a restart")
		Expect(apiRuleControllerRestarts(ctx)).To(Equal(restarts), "the same pods, none restarted")
	})

	It("is Ready once Traefik accepts the route, and Traefik routes the APIRule's host and paths to its Service, nothing else", func(ctx SpecContext) {
		skipUnlessNode()
		started := time.Now()
		startTraefik(ctx, traefikAddr, watched)
		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(orders))
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
			expectRouteAcceptedByTraefik(g, client.ObjectKeyFromObject(orders))
		}, timeout, interval).Should(Succeed())
		applied := time.Since(started)
		gw := &gatewayapiv1.Gateway{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: traefikNamespace, Name: traefikGatewayName}, gw)).To(Succeed())
		Expect(apimeta.IsStatusConditionTrue(gw.Status.Conditions, string(gatewayapiv1.GatewayConditionProgrammed))).To(BeTrue(), "Traefik programmed the Gateway")

		By("sending requests to Traefik with the APIRule's host (the status may come before the configuration)")
		Eventually(func(g Gomega) {
			code, body := throughTraefik(g, traefikAddr, http.MethodGet, ordersHost, "/health")
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(body).To(Equal("orders GET /health"))
		}, timeout, interval).Should(Succeed())
		gatewayAPIReport("APIRule %s: Applied %s and answering through Traefik %s after Traefik started",
			client.ObjectKeyFromObject(orders), applied.Round(100*time.Millisecond), time.Since(started).Round(100*time.Millisecond))
		for _, c := range []struct {
			method, host, path string
			code               int
			body               string
		}{
			{http.MethodGet, ordersHost, "/orders/42", http.StatusOK, "orders GET /orders/42"},
			{http.MethodPost, ordersHost, "/orders/42", http.StatusOK, "orders POST /orders/42"},
			// Only GET is routed on /health, and only the APIRule's paths.
			{http.MethodDelete, ordersHost, "/health", http.StatusNotFound, ""},
			{http.MethodGet, ordersHost, "/other", http.StatusNotFound, ""},
			{http.MethodGet, ordersHost, "/healthz", http.StatusNotFound, ""},
			// Hosts outside the APIRule are not routed.
			{http.MethodGet, "other.example.com", "/health", http.StatusNotFound, ""},
		} {
			code, body := throughTraefik(Default, traefikAddr, c.method, c.host, c.path)
			Expect(code).To(Equal(c.code), "%s http://%s%s: %s", c.method, c.host, c.path, body)
			if c.body != "" {
				Expect(body).To(Equal(c.body))
			}
		}
	})

	It("routes to a Service of another namespace only once that namespace grants it with a ReferenceGrant", func(ctx SpecContext) {
		skipUnlessNode()
		Expect(k8sClient.Create(ctx, stock.DeepCopy())).To(Succeed())
		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(stock))
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonReferenceNotPermitted), ready.Message)
		}, timeout, interval).Should(Succeed())
		Consistently(isGone(&gatewayapiv1.HTTPRoute{ObjectMeta: stock.ObjectMeta}), 2*time.Second, interval).Should(BeTrue(), "no HTTPRoute without the grant")
		code, body := throughTraefik(Default, traefikAddr, http.MethodGet, stockHost, "/stock/7")
		Expect(code).To(Equal(http.StatusNotFound), body)

		By("granting HTTPRoutes of shop the Service warehouse/stock")
		started := time.Now()
		Expect(k8sClient.Create(ctx, &gatewayapiv1beta1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Name: "shop-routes", Namespace: warehouseNamespace},
			Spec: gatewayapiv1beta1.ReferenceGrantSpec{
				From: []gatewayapiv1beta1.ReferenceGrantFrom{{Group: gatewayv1alpha1.GatewayAPIGroup, Kind: "HTTPRoute", Namespace: "shop"}},
				To:   []gatewayapiv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr.To(gatewayapiv1.ObjectName("stock"))}},
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			ready := apiRuleReady(g, client.ObjectKeyFromObject(stock))
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
			expectRouteAcceptedByTraefik(g, client.ObjectKeyFromObject(stock))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			code, body := throughTraefik(g, traefikAddr, http.MethodGet, stockHost, "/stock/7")
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(body).To(Equal("stock GET /stock/7"))
		}, timeout, interval).Should(Succeed())
		gatewayAPIReport("APIRule %s to warehouse/stock: answering through Traefik %s after the ReferenceGrant",
			client.ObjectKeyFromObject(stock), time.Since(started).Round(100*time.Millisecond))
	})

	It("stops routing when the APIRules are deleted; then Traefik and the Gateway go", func(ctx SpecContext) {
		skipUnlessNode()
		for _, r := range []*gatewayv1alpha1.APIRule{orders, stock} {
			Expect(k8sClient.Delete(ctx, r.DeepCopy())).To(Succeed())
			Eventually(isGone(&gatewayapiv1.HTTPRoute{ObjectMeta: r.ObjectMeta}), timeout, interval).Should(BeTrue())
		}
		Eventually(func(g Gomega) {
			code, body := throughTraefik(g, traefikAddr, http.MethodGet, ordersHost, "/health")
			g.Expect(code).To(Equal(http.StatusNotFound), body)
		}, timeout, interval).Should(Succeed())

		Expect(traefik.Terminate()).To(Succeed(), "Traefik shut down cleanly; its log: %s", filepath.Join(artifacts, "traefik.log"))
		for _, obj := range []client.Object{
			&gatewayapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: traefikGatewayName, Namespace: traefikNamespace}},
			&gatewayapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: traefikClass}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: warehouseNamespace}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: traefikNamespace}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik", Namespace: "shop"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik-cluster"}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-traefik-cluster"}},
		} {
			Expect(k8sClient.Delete(ctx, obj)).To(Succeed(), "delete %T %s", obj, obj.GetName())
		}
		for _, r := range []*gatewayv1alpha1.APIRule{orders, stock} {
			Eventually(isGone(r.DeepCopy()), timeout, interval).Should(BeTrue())
		}
	})
}

// apiRuleControllerRestarts maps the apirule controller's pods to the
// restarts of their container.
func apiRuleControllerRestarts(ctx context.Context) map[string]int32 {
	restarts := map[string]int32{}
	for _, p := range podsOf(ctx, "apirule-controller") {
		for _, c := range p.Status.ContainerStatuses {
			restarts[p.Name] += c.RestartCount
		}
	}
	return restarts
}

// freePort is a TCP port of 127.0.0.1 free right now.
func freePort() int32 {
	_, port, err := net.SplitHostPort(freeAddr())
	Expect(err).NotTo(HaveOccurred())
	n, err := strconv.ParseInt(port, 10, 32)
	Expect(err).NotTo(HaveOccurred())
	return int32(n)
}
