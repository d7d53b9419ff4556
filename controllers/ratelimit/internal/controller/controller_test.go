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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	for _, name := range []string{"shop", "istio-system", "bookinfo", "gateways", "edge"} {
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			panic(err)
		}
	}
	cacheOpts := cache.Options{}
	ConfigureCache(&cacheOpts)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: cacheOpts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		panic(err)
	}
	if err := (&Reconciler{Client: mgr.GetClient(), GatewaysKnown: true, APIRulesKnown: true, RootNamespace: topology.DefaultRootNamespace}).SetupWithManager(mgr); err != nil {
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

func gateway(name string) *networkingv1.Gateway { return gatewayIn("istio-system", name, ingress) }

func gatewayIn(ns, name string, selector map[string]string) *networkingv1.Gateway {
	return &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingapi.Gateway{Selector: selector, Servers: []*networkingapi.Server{{
			Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
		}}},
	}
}

// gatewayPod creates a pod as an ingress gateway Deployment would: only its
// namespace and labels matter to the controller.
func gatewayPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "istio-proxy", Image: "proxyv2"}}},
	}
	create(t, pod)
	return pod
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
	return envoyFilterIn(g, "istio-system", ingress)
}

func envoyFilterIn(g Gomega, ns string, selector map[string]string) (*networkingv1alpha3.EnvoyFilter, []map[string]any) {
	ef := &networkingv1alpha3.EnvoyFilter{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{
		Namespace: ns, Name: topology.EnvoyFilterName(ns, selector),
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
	gatewayPod(t, "istio-system", "ingressgateway-1", ingress)
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

	// A route limit on the same pods would replace the gateway-wide bucket
	// for its routes in Envoy: it loses to the older gateway-wide limit and
	// says so, instead of silently weakening it.
	create(t, rateLimit("shop", "orders", gatewayv1alpha1.TargetAPIRule, "orders", 50))
	g.Eventually(func(g Gomega) {
		c := verdict(g, "shop", "orders")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
		g.Expect(c.Message).To(ContainSubstring("limited gateway-wide by the older RateLimit istio-system/whole-gateway"))
		_, patches := envoyFilter(g)
		g.Expect(patches).To(HaveLen(1))
	}, eventually).Should(Succeed())

	// Without the gateway-wide limit, the route limit takes its route.
	g.Expect(k8sClient.Delete(ctx, whole)).To(Succeed())
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
	for _, name := range []client.ObjectKey{{Namespace: "shop", Name: "orders"}, {Namespace: "shop", Name: "orders-again"}} {
		g.Expect(k8sClient.Delete(ctx, &gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}})).To(Succeed())
	}
	g.Eventually(func() bool {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "istio-system", Name: topology.EnvoyFilterName("istio-system", ingress)}, &networkingv1alpha3.EnvoyFilter{})
		return apierrors.IsNotFound(err)
	}, eventually).Should(BeTrue())
}

// TestFilterGoesWhereTheGatewayPodsRun: a Gateway in a tenant namespace may
// select ingress pods that run in another namespace (the bookinfo layout).
// Istio applies an EnvoyFilter's workloadSelector only to pods of the
// filter's own namespace, so a filter beside the Gateway would limit
// nothing while the status claimed Enforced.
func TestFilterGoesWhereTheGatewayPodsRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "bookinfo-gateway"}
	create(t, gatewayIn("bookinfo", "bookinfo-gateway", selector))
	create(t, rateLimit("bookinfo", "bookinfo", gatewayv1alpha1.TargetGateway, "bookinfo-gateway", 100))

	// No pod runs the gateway yet: nothing would be limited.
	g.Eventually(func(g Gomega) {
		c := verdict(g, "bookinfo", "bookinfo")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
		g.Expect(c.Message).To(ContainSubstring("no pod matches the selector"))
	}, eventually).Should(Succeed())
	g.Consistently(func() []*networkingv1alpha3.EnvoyFilter {
		var list networkingv1alpha3.EnvoyFilterList
		g.Expect(k8sClient.List(ctx, &list, ManagedSelector)).To(Succeed())
		var mine []*networkingv1alpha3.EnvoyFilter
		for _, ef := range list.Items {
			if ef.Labels[topology.LabelWorkload] != "" && ef.Spec.WorkloadSelector != nil && ef.Spec.WorkloadSelector.Labels["app"] == "bookinfo-gateway" {
				mine = append(mine, ef)
			}
		}
		return mine
	}, time.Second).Should(BeEmpty())

	// The gateway pods start in their own namespace: the filter is written
	// there, and the pod's appearance alone triggers it.
	pod := gatewayPod(t, "gateways", "bookinfo-gateway-1", selector)
	g.Eventually(func(g Gomega) {
		ef, patches := envoyFilterIn(g, "gateways", selector)
		g.Expect(patches).To(HaveLen(1))
		g.Expect(ef.OwnerReferences).To(BeEmpty(), "an owner in another namespace would make the garbage collector delete the filter")
		c := verdict(g, "bookinfo", "bookinfo")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
		l := &gatewayv1alpha1.RateLimit{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "bookinfo", Name: "bookinfo"}, l)).To(Succeed())
		g.Expect(l.Status.EnvoyFilters).To(Equal([]string{"gateways/" + topology.EnvoyFilterName("gateways", selector)}))
	}, eventually).Should(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "bookinfo", Name: topology.EnvoyFilterName("bookinfo", selector)}, &networkingv1alpha3.EnvoyFilter{})).
		To(MatchError(apierrors.IsNotFound, "no filter beside the Gateway"))

	// The pods go away: the filter goes, and the status says why.
	g.Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "gateways", Name: topology.EnvoyFilterName("gateways", selector)}, &networkingv1alpha3.EnvoyFilter{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(verdict(g, "bookinfo", "bookinfo").Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
	}, eventually).Should(Succeed())
}

// TestFiltersAreOwnedByTheirRateLimits: a filter in its RateLimits'
// namespace names them as owners, so the garbage collector removes it when
// they are deleted even while the controller is disabled.
func TestFiltersAreOwnedByTheirRateLimits(t *testing.T) {
	g := NewWithT(t)
	selector := map[string]string{"app": "edge-gateway"}
	gatewayPod(t, "edge", "edge-gateway-1", selector)
	create(t, gatewayIn("edge", "edge", selector))
	limit := rateLimit("edge", "edge", gatewayv1alpha1.TargetGateway, "edge", 10)
	create(t, limit)
	g.Eventually(func(g Gomega) {
		ef, _ := envoyFilterIn(g, "edge", selector)
		g.Expect(ef.OwnerReferences).To(ConsistOf(And(
			HaveField("Kind", "RateLimit"), HaveField("Name", "edge"), HaveField("UID", limit.UID),
			HaveField("Controller", HaveValue(BeFalse())),
		)))
	}, eventually).Should(Succeed())
}

// adminsFilter is an EnvoyFilter the controller did not write.
func adminsFilter(ns, name string) *networkingv1alpha3.EnvoyFilter {
	return &networkingv1alpha3.EnvoyFilter{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingapi.EnvoyFilter{ConfigPatches: []*networkingapi.EnvoyFilter_EnvoyConfigObjectPatch{{
			ApplyTo: networkingapi.EnvoyFilter_HTTP_FILTER,
			Patch:   &networkingapi.EnvoyFilter_Patch{Operation: networkingapi.EnvoyFilter_Patch_REMOVE},
		}}},
	}
}

// TestForeignEnvoyFilterIsLeftUntouched: an EnvoyFilter of the same name that
// the controller did not write (an administrator's) is never overwritten or
// deleted; the RateLimit reports the conflict.
func TestForeignEnvoyFilterIsLeftUntouched(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "admin-gateway"}
	gatewayPod(t, "istio-system", "admin-gateway-1", selector)
	create(t, gatewayIn("istio-system", "admin", selector))
	foreign := adminsFilter("istio-system", topology.EnvoyFilterName("istio-system", selector))
	foreign.Labels = map[string]string{"owner": "admin"}
	foreign.Spec.WorkloadSelector = &networkingapi.WorkloadSelector{Labels: selector}
	create(t, foreign)
	limit := rateLimit("istio-system", "admin", gatewayv1alpha1.TargetGateway, "admin", 10)
	create(t, limit)
	g.Eventually(func(g Gomega) {
		c := verdict(g, "istio-system", "admin")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnvoyFilterFailed))
		g.Expect(c.Message).To(ContainSubstring("not managed by the ratelimit controller"))
	}, eventually).Should(Succeed())
	g.Expect(k8sClient.Delete(ctx, limit)).To(Succeed())
	g.Consistently(func(g Gomega) {
		live := &networkingv1alpha3.EnvoyFilter{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(foreign), live)).To(Succeed())
		g.Expect(live.Labels).To(Equal(foreign.Labels))
		g.Expect(live.OwnerReferences).To(BeEmpty())
		g.Expect(live.Spec.ConfigPatches).To(HaveLen(1))
		g.Expect(live.Spec.ConfigPatches[0].Patch.Operation).To(Equal(networkingapi.EnvoyFilter_Patch_REMOVE))
		g.Expect(live.Generation).To(Equal(int64(1)))
	}, 2*time.Second).Should(Succeed())
}

// TestRetireRemovesOnlyManagedFilters: when the controller is disabled it
// removes the EnvoyFilters it wrote, wherever they are, and nothing else.
func TestRetireRemovesOnlyManagedFilters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "retire-gateway"}
	gatewayPod(t, "gateways", "retire-gateway-1", selector)
	create(t, gatewayIn("bookinfo", "retire", selector))
	create(t, rateLimit("bookinfo", "retire", gatewayv1alpha1.TargetGateway, "retire", 10))
	g.Eventually(func(g Gomega) { envoyFilterIn(g, "gateways", selector) }, eventually).Should(Succeed())
	admins := adminsFilter("gateways", "admins-own-filter")
	create(t, admins)

	var before networkingv1alpha3.EnvoyFilterList
	g.Expect(k8sClient.List(ctx, &before, ManagedSelector)).To(Succeed())
	g.Expect(before.Items).NotTo(BeEmpty())
	g.Expect(Retire(ctx, k8sClient)).To(Succeed())
	for _, ef := range before.Items {
		// The reconciler of this test still runs and may write a filter
		// back, but never the same object.
		live := &networkingv1alpha3.EnvoyFilter{}
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ef), live)
		if err == nil {
			g.Expect(live.UID).NotTo(Equal(ef.UID), "EnvoyFilter %s/%s was not deleted", ef.Namespace, ef.Name)
		} else {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}
	}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(admins), &networkingv1alpha3.EnvoyFilter{})).To(Succeed())
}
