package controller

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/testenv"
)

const (
	ns = "shop"
	// otherNS holds Services that APIRules of ns route to across namespaces.
	otherNS    = "analytics"
	eventually = 20 * time.Second
)

var k8sClient client.Client

// testConfig reaches the test API server as an administrator.
var testConfig *rest.Config

// cached reads the controller's own cache, to see what it holds.
var cached client.Reader

// schemeKinds are the apirule controller's types (controllers/apirule/main.go)
// beyond those testenv.Scheme always has.
var schemeKinds = []func(*runtime.Scheme) error{
	discoveryv1.AddToScheme, porticov1alpha1.AddToScheme, networkingv1.AddToScheme, securityv1.AddToScheme,
	gwapiv1.Install, gwapiv1beta1.Install,
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		Istio:       true,
		GatewayAPI:  true,
		AddToScheme: schemeKinds,
		Namespaces:  []string{ns, otherNS, "istio-system"},
		Setup:       startController,
	}))
}

// startController creates the Istio Gateway the APIRules use and runs the
// reconciler in a manager until the tests ran.
func startController(ctx context.Context, env *testenv.Env) error {
	k8sClient, testConfig = env.Client, env.Config
	gw := &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "public", Namespace: "istio-system"},
		Spec: networkingv1alpha3.Gateway{Selector: map[string]string{"istio": "ingressgateway"}, Servers: []*networkingv1alpha3.Server{{
			Port: &networkingv1alpha3.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
		}}},
	}
	if err := k8sClient.Create(ctx, gw); err != nil {
		return err
	}
	cacheOpts := cache.Options{}
	ConfigureCache(&cacheOpts, AllInstalled())
	mgr, err := ctrl.NewManager(countedConfig(env.Config), ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	cached = mgr.GetCache()
	if err := (&Reconciler{Client: mgr.GetClient(), Installed: AllInstalled(),
		Recorder: mgr.GetEventRecorder(FieldManager)}).SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}

func createService(t *testing.T, name string) {
	t.Helper()
	createServiceIn(t, ns, name, nil)
}

func createServiceIn(t *testing.T, namespace, name string, annotations map[string]string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), svc)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), svc) })
}

func createAPIRule(t *testing.T, name, service string, rules ...porticov1alpha1.Rule) *porticov1alpha1.APIRule {
	t.Helper()
	r := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts:   []porticov1alpha1.Hostname{porticov1alpha1.Hostname(name + ".example.com")},
			Gateway: "istio-system/public",
			Service: &porticov1alpha1.ServiceReference{Name: service, Port: 8080},
			Rules:   rules,
		},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), r)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), r) })
	return r
}

func updateAPIRule(t *testing.T, name string, mutate func(*porticov1alpha1.APIRule)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		r := &porticov1alpha1.APIRule{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
			return err
		}
		mutate(r)
		return k8sClient.Update(context.Background(), r)
	}, eventually).Should(Succeed())
}

func readyCondition(g Gomega, name string) *metav1.Condition {
	r := &porticov1alpha1.APIRule{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r)).To(Succeed())
	c := meta.FindStatusCondition(r.Status.Conditions, porticov1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ObservedGeneration).To(Equal(r.Generation))
	return c
}

func get(g Gomega, name string, obj client.Object) {
	getIn(g, ns, name, obj)
}

func getIn(g Gomega, namespace, name string, obj client.Object) {
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)).To(Succeed())
}

func gone(name string, obj client.Object) func() bool {
	return goneIn(ns, name, obj)
}

func goneIn(namespace, name string, obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj))
	}
}

var (
	health = porticov1alpha1.Rule{Path: "/health", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}
	orders = porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"GET"}, JWT: &porticov1alpha1.JWTAuthentication{
		Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json", Audiences: []string{"orders"},
	}}
)

func TestAPIRuleLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createService(t, "orders")
	createAPIRule(t, "orders", "orders", health)

	g.Eventually(func(g Gomega) {
		vs := &networkingv1.VirtualService{}
		get(g, "orders", vs)
		g.Expect(vs.Spec.Hosts).To(Equal([]string{"orders.example.com"}))
		g.Expect(vs.Spec.Gateways).To(Equal([]string{"istio-system/public"}))
		g.Expect(vs.Spec.Http).To(HaveLen(1))
		g.Expect(vs.Spec.Http[0].Route[0].Destination.Host).To(Equal("orders.shop.svc.cluster.local"))
		g.Expect(vs.Spec.Http[0].Match[0].Uri.GetExact()).To(Equal("/health"))
		g.Expect(vs.OwnerReferences).To(ConsistOf(HaveField("Kind", "APIRule")))
		ap := &securityv1.AuthorizationPolicy{}
		get(g, "orders", ap)
		g.Expect(ap.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "orders"}))
		g.Expect(ap.Spec.Rules[0].To[0].Operation.Paths).To(Equal([]string{"/health"}))
		g.Expect(ap.Spec.Rules[0].From).To(BeEmpty(), "noAuth admits every source")
		c := readyCondition(g, "orders")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonApplied))
	}, eventually).Should(Succeed())
	g.Expect(gone("orders", &securityv1.RequestAuthentication{})()).To(BeTrue(), "no JWT rule, no RequestAuthentication")

	t.Run("a JWT rule adds a RequestAuthentication and a principal requirement", func(t *testing.T) {
		g := NewWithT(t)
		updateAPIRule(t, "orders", func(r *porticov1alpha1.APIRule) { r.Spec.Rules = append(r.Spec.Rules, orders) })
		g.Eventually(func(g Gomega) {
			ra := &securityv1.RequestAuthentication{}
			get(g, "orders", ra)
			g.Expect(ra.Spec.JwtRules).To(HaveLen(1))
			g.Expect(ra.Spec.JwtRules[0].Issuer).To(Equal("https://idp.example.com"))
			g.Expect(ra.Spec.JwtRules[0].JwksUri).To(Equal("https://idp.example.com/jwks.json"))
			ap := &securityv1.AuthorizationPolicy{}
			get(g, "orders", ap)
			g.Expect(ap.Spec.Rules).To(HaveLen(2))
			g.Expect(ap.Spec.Rules[1].From[0].Source.RequestPrincipals).To(Equal([]string{"https://idp.example.com/*"}))
			g.Expect(ap.Spec.Rules[1].When).To(HaveEach(HaveField("Key", BeElementOf("request.auth.claims[iss]", "request.auth.claims[aud]"))))
			g.Expect(ap.Spec.Rules[1].When).To(HaveLen(2))
		}, eventually).Should(Succeed())
	})

	t.Run("a changed rule updates the VirtualService", func(t *testing.T) {
		g := NewWithT(t)
		updateAPIRule(t, "orders", func(r *porticov1alpha1.APIRule) { r.Spec.Rules[0].Path = "/healthz" })
		g.Eventually(func(g Gomega) {
			vs := &networkingv1.VirtualService{}
			get(g, "orders", vs)
			var paths []string
			for _, h := range vs.Spec.Http {
				paths = append(paths, h.Match[0].Uri.GetExact()+h.Match[0].Uri.GetPrefix())
			}
			g.Expect(paths).To(ConsistOf("/healthz", "/orders/"))
		}, eventually).Should(Succeed())
	})

	t.Run("removing the last JWT rule deletes the RequestAuthentication", func(t *testing.T) {
		g := NewWithT(t)
		updateAPIRule(t, "orders", func(r *porticov1alpha1.APIRule) { r.Spec.Rules = r.Spec.Rules[:1] })
		g.Eventually(gone("orders", &securityv1.RequestAuthentication{}), eventually).Should(BeTrue())
	})

	t.Run("a VirtualService deleted by hand is recreated", func(t *testing.T) {
		g := NewWithT(t)
		vs := &networkingv1.VirtualService{}
		get(g, "orders", vs)
		g.Expect(k8sClient.Delete(ctx, vs)).To(Succeed())
		g.Eventually(func(g Gomega) {
			again := &networkingv1.VirtualService{}
			get(g, "orders", again)
			g.Expect(again.UID).NotTo(Equal(vs.UID))
		}, eventually).Should(Succeed())
	})

	t.Run("an edited VirtualService is reverted", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() error {
			vs := &networkingv1.VirtualService{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, vs); err != nil {
				return err
			}
			vs.Spec.Hosts = []string{"evil.example.com"}
			return k8sClient.Update(ctx, vs, client.FieldOwner("kubectl-edit"))
		}, eventually).Should(Succeed())
		g.Eventually(func(g Gomega) {
			vs := &networkingv1.VirtualService{}
			get(g, "orders", vs)
			g.Expect(vs.Spec.Hosts).To(Equal([]string{"orders.example.com"}))
		}, eventually).Should(Succeed())
	})
}

func TestMissingServiceWritesNothing(t *testing.T) {
	g := NewWithT(t)
	createAPIRule(t, "ghost", "ghost", health)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "ghost")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonServiceNotFound))
		g.Expect(c.Message).To(ContainSubstring("service shop/ghost not found"))
	}, eventually).Should(Succeed())
	g.Expect(gone("ghost", &networkingv1.VirtualService{})()).To(BeTrue())
	g.Expect(gone("ghost", &securityv1.AuthorizationPolicy{})()).To(BeTrue())

	// The Service appears: the rule is applied without touching the APIRule.
	createService(t, "ghost")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "ghost").Status).To(Equal(metav1.ConditionTrue))
		get(g, "ghost", &networkingv1.VirtualService{})
	}, eventually).Should(Succeed())
}

func TestMissingGatewayIsReported(t *testing.T) {
	g := NewWithT(t)
	createService(t, "lost")
	r := createAPIRule(t, "lost", "lost", health)
	updateAPIRule(t, r.Name, func(r *porticov1alpha1.APIRule) { r.Spec.Gateway = "istio-system/nowhere" })
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "lost")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonGatewayNotFound))
		g.Expect(c.Message).To(ContainSubstring("istio-system/nowhere"))
	}, eventually).Should(Succeed())
}

func TestInvalidAPIRuleIsRejectedByTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	bad := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts: []porticov1alpha1.Hostname{"bad.example.com"}, Gateway: "istio-system/public",
			Service: &porticov1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules:   []porticov1alpha1.Rule{{Path: "/x", NoAuth: ptr.To(true), JWT: orders.JWT}},
		},
	}
	g.Expect(k8sClient.Create(context.Background(), bad)).To(MatchError(ContainSubstring("each rule needs exactly one of noAuth: true, jwt or extAuth")))
}

// A message built from many objects or errors is cut to the contract's
// bound, so the status write that carries it cannot fail on its length.
func TestReadyMessageIsBounded(t *testing.T) {
	g := NewWithT(t)
	rule := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, strings.Repeat("create VirtualService x: denied; ", 1000))
	c := meta.FindStatusCondition(rule.Status.Conditions, porticov1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	g.Expect(len(c.Message)).To(BeNumerically("<=", contract.MessageMaxLength))
	g.Expect(c.Message).To(HaveSuffix(contract.TruncatedNote))
	g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
}
