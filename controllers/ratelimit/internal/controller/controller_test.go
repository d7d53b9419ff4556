package controller

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	"github.com/portico-dev/portico/hack/testenv"
)

const eventually = 20 * time.Second

var (
	k8sClient client.Client
	ingress   = map[string]string{"istio": "ingressgateway"}
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	env, err := testenv.Environment()
	if err != nil {
		panic(err)
	}
	if env.CRDs, err = testenv.IstioCRDs(); err != nil {
		panic(err)
	}
	cfg, err := env.Start()
	if err != nil {
		panic(err)
	}
	defer func() { _ = env.Stop() }()
	k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme()})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, name := range []string{"shop", "istio-system"} {
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			panic(err)
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		panic(err)
	}
	if err := (&Reconciler{Client: mgr.GetClient(), GatewaysKnown: true, APIRulesKnown: true}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	return m.Run()
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(k8sClient.Create(context.Background(), obj)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
}

func gateway(name string) *networkingv1.Gateway {
	return &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "istio-system"},
		Spec: networkingapi.Gateway{Selector: ingress, Servers: []*networkingapi.Server{{
			Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
		}}},
	}
}

func rateLimit(ns, name string, kind gatewayv1alpha1.TargetKind, target string, maxTokens int64) *gatewayv1alpha1.RateLimit {
	return &gatewayv1alpha1.RateLimit{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gatewayv1alpha1.RateLimitSpec{
			TargetRef: gatewayv1alpha1.TargetReference{Kind: kind, Name: target},
			Local:     gatewayv1alpha1.TokenBucket{MaxTokens: maxTokens, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
		},
	}
}

func verdict(g Gomega, ns, name string) *metav1.Condition {
	l := &gatewayv1alpha1.RateLimit{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	c := meta.FindStatusCondition(l.Status.Conditions, gatewayv1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ObservedGeneration).To(Equal(l.Generation))
	return c
}

func envoyFilter(g Gomega) (*networkingv1alpha3.EnvoyFilter, []map[string]any) {
	ef := &networkingv1alpha3.EnvoyFilter{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{
		Namespace: "istio-system", Name: topology.EnvoyFilterName("istio-system", ingress),
	}, ef)).To(Succeed())
	raw, err := json.Marshal(&ef.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	var spec struct {
		ConfigPatches []map[string]any `json:"configPatches"`
	}
	g.Expect(json.Unmarshal(raw, &spec)).To(Succeed())
	return ef, spec.ConfigPatches
}

func TestEnvoyFilterFollowsThePolicies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	create(t, gateway("public"))
	rule := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts: []gatewayv1alpha1.Hostname{"orders.example.com"}, Gateway: "istio-system/public",
			Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules:   []gatewayv1alpha1.Rule{{Path: "/orders/*", NoAuth: ptr.To(true)}},
		},
	}
	create(t, rule)
	whole := rateLimit("istio-system", "whole-gateway", gatewayv1alpha1.TargetGateway, "public", 1000)
	create(t, whole)

	g.Eventually(func(g Gomega) {
		ef, patches := envoyFilter(g)
		g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(ingress))
		g.Expect(patches).To(HaveLen(1))
		cfg := patches[0]["patch"].(map[string]any)["value"].(map[string]any)["typed_config"].(map[string]any)["value"].(map[string]any)
		g.Expect(cfg["token_bucket"].(map[string]any)["max_tokens"]).To(BeEquivalentTo(1000))
		c := verdict(g, "istio-system", "whole-gateway")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
	}, eventually).Should(Succeed())

	// A second policy, on the APIRule's paths, joins the same EnvoyFilter.
	create(t, rateLimit("shop", "orders", gatewayv1alpha1.TargetAPIRule, "orders", 50))
	g.Eventually(func(g Gomega) {
		_, patches := envoyFilter(g)
		g.Expect(patches).To(HaveLen(2))
		g.Expect(patches[1]["applyTo"]).To(Equal("HTTP_ROUTE"))
		route := patches[1]["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)["route"].(map[string]any)["name"]
		g.Expect(route).To(Equal(gatewayv1alpha1.RouteName("shop", "orders", rule.Spec.Rules[0])))
		g.Expect(verdict(g, "shop", "orders").Status).To(Equal(metav1.ConditionTrue))
	}, eventually).Should(Succeed())

	// A newer policy on the same APIRule loses and says so.
	create(t, rateLimit("shop", "orders-again", gatewayv1alpha1.TargetAPIRule, "orders", 5))
	g.Eventually(func(g Gomega) {
		c := verdict(g, "shop", "orders-again")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
		g.Expect(c.Message).To(ContainSubstring("older RateLimit shop/orders"))
	}, eventually).Should(Succeed())

	// A policy for a missing target reports it.
	create(t, rateLimit("shop", "stray", gatewayv1alpha1.TargetAPIRule, "nothing", 5))
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "shop", "stray").Reason).To(Equal(gatewayv1alpha1.ReasonTargetNotFound))
	}, eventually).Should(Succeed())

	// An EnvoyFilter deleted by hand comes back.
	ef, _ := envoyFilter(g)
	g.Expect(k8sClient.Delete(ctx, ef)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again, _ := envoyFilter(g)
		g.Expect(again.UID).NotTo(Equal(ef.UID))
	}, eventually).Should(Succeed())

	// Removing every enforced policy removes the EnvoyFilter.
	for _, name := range []client.ObjectKey{{Namespace: "istio-system", Name: "whole-gateway"}, {Namespace: "shop", Name: "orders"}, {Namespace: "shop", Name: "orders-again"}} {
		g.Expect(k8sClient.Delete(ctx, &gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}})).To(Succeed())
	}
	g.Eventually(func() bool {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "istio-system", Name: topology.EnvoyFilterName("istio-system", ingress)}, &networkingv1alpha3.EnvoyFilter{})
		return client.IgnoreNotFound(err) == nil && err != nil
	}, eventually).Should(BeTrue())
}
