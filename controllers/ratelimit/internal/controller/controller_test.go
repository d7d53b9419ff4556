package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	"github.com/portico-dev/portico/test/testenv"
)

const eventually = 20 * time.Second

// porticoNamespace is Portico's namespace: the rate-limit service's feed
// and key live there.
const porticoNamespace = "portico-system"

var (
	k8sClient client.Client
	ingress   = map[string]string{"istio": "ingressgateway"}
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		Istio:      true,
		GatewayAPI: true,
		// The ratelimit controller's types (controllers/ratelimit/main.go).
		AddToScheme: []func(*runtime.Scheme) error{
			gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, gatewayapiv1.Install,
		},
		Namespaces: []string{"shop", "istio-system", "bookinfo", "gateways", "edge", "team-a", "team-b", "team-g", porticoNamespace},
		Setup:      startController,
	}))
}

// startController runs the reconciler in a manager until the tests ran.
func startController(ctx context.Context, env *testenv.Env) error {
	k8sClient = env.Client
	cacheOpts := cache.Options{}
	ConfigureCache(&cacheOpts, true)
	ConfigureGlobalCache(&cacheOpts, porticoNamespace)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: cacheOpts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), GatewaysKnown: true, GatewayAPIGatewaysKnown: true, APIRulesKnown: true, RootNamespace: topology.DefaultRootNamespace,
		Global: Global{Enabled: true, FailOpen: true, Timeout: 100 * time.Millisecond, Namespace: porticoNamespace}}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
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
			Local:     &gatewayv1alpha1.TokenBucket{MaxTokens: maxTokens, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
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

// envoyFilter is the filter in istio-system for the RateLimits of tenant
// on the ingress pods.
func envoyFilter(g Gomega, tenant string) (*networkingv1alpha3.EnvoyFilter, []map[string]any) {
	return envoyFilterIn(g, "istio-system", tenant, ingress)
}

// filterKey is the key of the EnvoyFilter in ns for the RateLimits of
// tenant on the pods selector matches.
func filterKey(ns, tenant string, selector map[string]string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: topology.EnvoyFilterName(ns, tenant, selector)}
}

// gone reports whether the EnvoyFilter of key does not exist.
func gone(key client.ObjectKey) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), key, &networkingv1alpha3.EnvoyFilter{}))
	}
}

func envoyFilterIn(g Gomega, ns, tenant string, selector map[string]string) (*networkingv1alpha3.EnvoyFilter, []map[string]any) {
	ef := &networkingv1alpha3.EnvoyFilter{}
	g.Expect(k8sClient.Get(context.Background(), filterKey(ns, tenant, selector), ef)).To(Succeed())
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
	rule := apiRule("shop", "orders", "istio-system/public", "/orders/*")
	create(t, rule)
	whole := rateLimit("istio-system", "whole-gateway", gatewayv1alpha1.TargetGateway, "public", 1000)
	create(t, whole)

	g.Eventually(func(g Gomega) {
		ef, patches := envoyFilter(g, "istio-system")
		g.Expect(ef.Spec.WorkloadSelector.Labels).To(Equal(ingress))
		g.Expect(patches).To(HaveLen(1))
		cfg := patches[0]["patch"].(map[string]any)["value"].(map[string]any)["typed_config"].(map[string]any)["value"].(map[string]any)
		g.Expect(cfg["token_bucket"].(map[string]any)["max_tokens"]).To(BeEquivalentTo(1000))
		c := verdict(g, "istio-system", "whole-gateway")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
	}, eventually).Should(Succeed())

	// A route limit on the same pods would replace the gateway-wide bucket
	// for its routes in Envoy: it loses to the gateway-wide limit of the
	// namespace where the pods run and says so, without naming it, instead
	// of silently weakening it.
	create(t, rateLimit("shop", "orders", gatewayv1alpha1.TargetAPIRule, "orders", 50))
	g.Eventually(func(g Gomega) {
		c := verdict(g, "shop", "orders")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
		g.Expect(c.Message).To(ContainSubstring("limited gateway-wide by a RateLimit of the namespace where the pods run"))
		g.Expect(c.Message).NotTo(ContainSubstring("whole-gateway"))
		_, patches := envoyFilter(g, "istio-system")
		g.Expect(patches).To(HaveLen(1))
	}, eventually).Should(Succeed())
	g.Expect(gone(filterKey("istio-system", "shop", ingress))()).To(BeTrue())

	// Without the gateway-wide limit, the route limit takes its route, in a
	// filter of shop's own; the gateway-wide filter goes.
	g.Expect(k8sClient.Delete(ctx, whole)).To(Succeed())
	g.Eventually(gone(filterKey("istio-system", "istio-system", ingress)), eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		ef, patches := envoyFilter(g, "shop")
		g.Expect(ef.Labels).To(HaveKeyWithValue(topology.LabelNamespace, "shop"))
		g.Expect(ef.OwnerReferences).To(BeEmpty(), "an owner in another namespace would make the garbage collector delete the filter")
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
	ef, _ := envoyFilter(g, "shop")
	g.Expect(k8sClient.Delete(ctx, ef)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again, _ := envoyFilter(g, "shop")
		g.Expect(again.UID).NotTo(Equal(ef.UID))
	}, eventually).Should(Succeed())

	// Removing every enforced policy removes the EnvoyFilter.
	for _, name := range []client.ObjectKey{{Namespace: "shop", Name: "orders"}, {Namespace: "shop", Name: "orders-again"}} {
		g.Expect(k8sClient.Delete(ctx, &gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}})).To(Succeed())
	}
	g.Eventually(gone(filterKey("istio-system", "shop", ingress)), eventually).Should(BeTrue())
}

// apiRule is an APIRule on gateway with one noAuth rule per path.
func apiRule(ns, name, gateway string, paths ...string) *gatewayv1alpha1.APIRule {
	r := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:   []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(name + "." + ns + ".example.com")},
			Gateway: gateway,
			Service: &gatewayv1alpha1.ServiceReference{Name: name, Port: 8080},
		},
	}
	for _, path := range paths {
		r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: path, NoAuth: ptr.To(true)})
	}
	return r
}

// managedFiltersSelecting lists the managed EnvoyFilters whose workload
// selector is selector, wherever they are.
func managedFiltersSelecting(g Gomega, selector map[string]string) []string {
	var list networkingv1alpha3.EnvoyFilterList
	g.Expect(k8sClient.List(context.Background(), &list, ManagedSelector)).To(Succeed())
	var keys []string
	for _, ef := range list.Items {
		if ef.Spec.WorkloadSelector != nil && equality.Semantic.DeepEqual(ef.Spec.WorkloadSelector.Labels, selector) {
			keys = append(keys, ef.Namespace+"/"+ef.Name)
		}
	}
	return keys
}

// TestFilterGoesToTheTenantsOrTheRootNamespace: a Gateway in a tenant
// namespace may select ingress pods that run in another namespace (the
// bookinfo layout). Istio applies an EnvoyFilter's workloadSelector only to
// pods of the filter's own namespace, or of every namespace from the root
// namespace; the filter must never be written into a namespace that is not
// the tenant's. So it goes to Istio's root namespace, and a gateway-wide
// limit, which would throttle pods that are not the tenant's, is not
// applied.
func TestFilterGoesToTheTenantsOrTheRootNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "bookinfo-gateway"}
	create(t, gatewayIn("bookinfo", "bookinfo-gateway", selector))
	create(t, apiRule("bookinfo", "reviews", "bookinfo/bookinfo-gateway", "/reviews"))
	routes := rateLimit("bookinfo", "reviews", gatewayv1alpha1.TargetAPIRule, "reviews", 100)
	create(t, routes)

	// No pod runs the gateway yet: nothing would be limited.
	g.Eventually(func(g Gomega) {
		c := verdict(g, "bookinfo", "reviews")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
		g.Expect(c.Message).To(ContainSubstring("no pod matches the selector"))
	}, eventually).Should(Succeed())
	g.Consistently(func(g Gomega) []string { return managedFiltersSelecting(g, selector) }, time.Second).Should(BeEmpty())

	// The gateway pods start in a namespace of their own: the filter goes to
	// the root namespace, and the pod's appearance alone triggers it.
	pod := gatewayPod(t, "gateways", "bookinfo-gateway-1", selector)
	root := filterKey("istio-system", "bookinfo", selector)
	g.Eventually(func(g Gomega) {
		ef, patches := envoyFilterIn(g, "istio-system", "bookinfo", selector)
		g.Expect(patches).To(HaveLen(2))
		g.Expect(ef.OwnerReferences).To(BeEmpty(), "an owner in another namespace would make the garbage collector delete the filter")
		g.Expect(verdict(g, "bookinfo", "reviews").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
		l := &gatewayv1alpha1.RateLimit{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(routes), l)).To(Succeed())
		g.Expect(l.Status.EnvoyFilters).To(Equal([]string{root.String()}))
	}, eventually).Should(Succeed())
	g.Expect(managedFiltersSelecting(g, selector)).To(Equal([]string{root.String()}), "nothing beside the Gateway or the pods")

	// A gateway-wide limit would throttle pods of another namespace.
	create(t, rateLimit("bookinfo", "whole", gatewayv1alpha1.TargetGateway, "bookinfo-gateway", 100))
	g.Eventually(func(g Gomega) {
		c := verdict(g, "bookinfo", "whole")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
		g.Expect(c.Message).To(ContainSubstring("no pod that Istio gateway bookinfo/bookinfo-gateway selects (app=bookinfo-gateway) runs in namespace bookinfo"))
	}, eventually).Should(Succeed())

	// The pods move into the tenant's namespace: the gateway-wide limit
	// applies there (the route limit, older, keeps the pods' routes, so it
	// is dropped first).
	g.Expect(k8sClient.Delete(ctx, routes)).To(Succeed())
	g.Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	pod = gatewayPod(t, "bookinfo", "bookinfo-gateway-2", selector)
	own := filterKey("bookinfo", "bookinfo", selector)
	g.Eventually(func(g Gomega) {
		ef, patches := envoyFilterIn(g, "bookinfo", "bookinfo", selector)
		g.Expect(patches).To(HaveLen(1))
		g.Expect(ef.OwnerReferences).To(ConsistOf(HaveField("Name", "whole")))
		g.Expect(verdict(g, "bookinfo", "whole").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
		g.Expect(managedFiltersSelecting(g, selector)).To(Equal([]string{own.String()}))
	}, eventually).Should(Succeed())

	// The pods go away: the filter goes, and the status says why.
	g.Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(gone(own), eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "bookinfo", "whole").Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
	}, eventually).Should(Succeed())
}

// TestAnotherTenantsGatewayChangesNothing: tenant B creates a Gateway that
// selects A's ingress pods, routes an APIRule through it and limits it;
// A's gateway-wide limit stays enforced and its filter is not touched.
func TestAnotherTenantsGatewayChangesNothing(t *testing.T) {
	g := NewWithT(t)
	selector := map[string]string{"app": "team-a-gateway"}
	gatewayPod(t, "team-a", "team-a-gateway-1", selector)
	create(t, gatewayIn("team-a", "gateway", selector))
	create(t, rateLimit("team-a", "whole", gatewayv1alpha1.TargetGateway, "gateway", 100))
	var before *networkingv1alpha3.EnvoyFilter
	g.Eventually(func(g Gomega) {
		before, _ = envoyFilterIn(g, "team-a", "team-a", selector)
		g.Expect(verdict(g, "team-a", "whole").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
	}, eventually).Should(Succeed())

	create(t, gatewayIn("team-b", "steal", selector))
	create(t, apiRule("team-b", "steal", "team-b/steal", "/steal"))
	create(t, rateLimit("team-b", "steal-routes", gatewayv1alpha1.TargetAPIRule, "steal", 1))
	create(t, rateLimit("team-b", "steal-gateway", gatewayv1alpha1.TargetGateway, "steal", 1))
	g.Eventually(func(g Gomega) {
		c := verdict(g, "team-b", "steal-routes")
		g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
		g.Expect(c.Message).NotTo(ContainSubstring("team-a"))
		g.Expect(verdict(g, "team-b", "steal-gateway").Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
	}, eventually).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(verdict(g, "team-a", "whole").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
		ef, _ := envoyFilterIn(g, "team-a", "team-a", selector)
		g.Expect(ef.UID).To(Equal(before.UID))
		g.Expect(ef.Generation).To(Equal(before.Generation))
		g.Expect(managedFiltersSelecting(g, selector)).To(Equal([]string{"team-a/" + ef.Name}), "B writes no filter")
	}, 2*time.Second).Should(Succeed())
}

// atTheBounds is a RateLimit on an APIRule at the CRD's bounds, with the
// largest rendering: 16 descriptors holding 512 characters that JSON
// escapes to six bytes each.
func atTheBounds(ns, name, target string) *gatewayv1alpha1.RateLimit {
	l := rateLimit(ns, name, gatewayv1alpha1.TargetAPIRule, target, 1_000_000_000)
	bucket := gatewayv1alpha1.TokenBucket{MaxTokens: 1_000_000_000, TokensPerFill: 1_000_000_000, FillInterval: metav1.Duration{Duration: 24*time.Hour - time.Nanosecond}}
	for range 16 {
		l.Spec.Descriptors = append(l.Spec.Descriptors, gatewayv1alpha1.Descriptor{
			Path:   "/" + strings.Repeat("<", 15),
			Header: &gatewayv1alpha1.HeaderMatch{Name: "&", Value: strings.Repeat(">", 15)},
			Bucket: &bucket,
		})
	}
	return l
}

// routeMaxTokens reads the max_tokens of the first route patch of a filter
// for the RateLimits of tenant in istio-system.
func routeMaxTokens(g Gomega, tenant string, selector map[string]string) any {
	_, patches := envoyFilterIn(g, "istio-system", tenant, selector)
	g.Expect(len(patches)).To(BeNumerically(">=", 2))
	perRoute := patches[1]["patch"].(map[string]any)["value"].(map[string]any)["typed_per_filter_config"].(map[string]any)
	cfg := perRoute[topology.HTTPFilterName("istio-system", tenant, selector)].(map[string]any)["value"].(map[string]any)
	return cfg["token_bucket"].(map[string]any)["max_tokens"]
}

// TestATenantOverTheBudgetFailsAlone: tenant B piles RateLimits at the
// CRD's bounds onto the shared ingress pods until its EnvoyFilter exceeds
// the size budget. B's RateLimits report EnvoyFilterFailed and B's filter
// is not written; A's filter on the same pods keeps following A's changes.
func TestATenantOverTheBudgetFailsAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "shared-gateway"}
	gatewayPod(t, "istio-system", "shared-gateway-1", selector)
	create(t, gatewayIn("istio-system", "shared", selector))
	create(t, apiRule("team-a", "api", "istio-system/shared", "/a/*"))
	limitA := rateLimit("team-a", "api", gatewayv1alpha1.TargetAPIRule, "api", 10)
	create(t, limitA)
	g.Eventually(func(g Gomega) { g.Expect(routeMaxTokens(g, "team-a", selector)).To(BeEquivalentTo(10)) }, eventually).Should(Succeed())

	for i := range 2 {
		var paths []string
		for j := range 64 {
			paths = append(paths, fmt.Sprintf("/b%d/%02d", i, j))
		}
		name := fmt.Sprintf("huge-%d", i)
		create(t, apiRule("team-b", name, "istio-system/shared", paths...))
		create(t, atTheBounds("team-b", name, name))
	}
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"huge-0", "huge-1"} {
			c := verdict(g, "team-b", name)
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnvoyFilterFailed))
			g.Expect(c.Message).To(ContainSubstring("over the budget of 768 KiB for the rate limits of namespace team-b"))
		}
	}, eventually).Should(Succeed())
	// B's filter is not written: if the first RateLimit alone was applied
	// before the second came, that version stays, unchanged.
	if bFilter := filterKey("istio-system", "team-b", selector); !gone(bFilter)() {
		_, patches := envoyFilterIn(g, bFilter.Namespace, "team-b", selector)
		g.Expect(patches).To(HaveLen(1+64), "the listener filter and the routes of one APIRule only")
	}

	// A's change still reaches A's filter.
	g.Eventually(func() error {
		l := &gatewayv1alpha1.RateLimit{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(limitA), l); err != nil {
			return err
		}
		l.Spec.Local.MaxTokens = 20
		return k8sClient.Update(ctx, l)
	}, eventually).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(routeMaxTokens(g, "team-a", selector)).To(BeEquivalentTo(20))
		g.Expect(verdict(g, "team-a", "api").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
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
		ef, _ := envoyFilterIn(g, "edge", "edge", selector)
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
	foreign := adminsFilter("istio-system", topology.EnvoyFilterName("istio-system", "istio-system", selector))
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
// removes the EnvoyFilters it wrote, wherever they are (here in Istio's root
// namespace and in a tenant's), and nothing else.
func TestRetireRemovesOnlyManagedFilters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "retire-gateway"}
	tenantSelector := map[string]string{"app": "retire-tenant-gateway"}
	gatewayPod(t, "gateways", "retire-gateway-1", selector)
	gatewayPod(t, "bookinfo", "retire-tenant-gateway-1", tenantSelector)
	create(t, gatewayIn("bookinfo", "retire", selector))
	create(t, gatewayIn("bookinfo", "retire-tenant", tenantSelector))
	create(t, apiRule("bookinfo", "retire", "bookinfo/retire", "/retire"))
	create(t, rateLimit("bookinfo", "retire", gatewayv1alpha1.TargetAPIRule, "retire", 10))
	create(t, rateLimit("bookinfo", "retire-tenant", gatewayv1alpha1.TargetGateway, "retire-tenant", 10))
	g.Eventually(func(g Gomega) {
		envoyFilterIn(g, "istio-system", "bookinfo", selector)
		envoyFilterIn(g, "bookinfo", "bookinfo", tenantSelector)
	}, eventually).Should(Succeed())
	admins := adminsFilter("gateways", "admins-own-filter")
	create(t, admins)
	// A tenant's look-alike: the controller's labels, naming another
	// namespace than its own.
	lookAlike := adminsFilter("bookinfo", "look-alike")
	lookAlike.Labels = map[string]string{topology.LabelManagedBy: topology.ManagedBy, topology.LabelNamespace: "shop"}
	create(t, lookAlike)

	var before networkingv1alpha3.EnvoyFilterList
	g.Expect(k8sClient.List(ctx, &before, ManagedSelector)).To(Succeed())
	g.Expect(before.Items).NotTo(BeEmpty())
	g.Expect(Retire(ctx, k8sClient, "")).To(Succeed())
	for _, ef := range before.Items {
		if ef.UID == lookAlike.UID {
			continue
		}
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
	live := &networkingv1alpha3.EnvoyFilter{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(lookAlike), live)).To(Succeed(), "the look-alike was retired")
	g.Expect(live.DeletionTimestamp).To(BeNil())
}

// An APIRule's events reach the RateLimits that target it, whichever comes
// first: the APIRule appearing after its RateLimit, a path edited (a new
// Envoy route name) and the APIRule going.
func TestTargetedAPIRuleEvents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "shop-gateway"}
	gatewayPod(t, "shop", "shop-gateway-1", selector)
	create(t, gatewayIn("shop", "shop-gateway", selector))
	create(t, rateLimit("shop", "late", gatewayv1alpha1.TargetAPIRule, "late", 10))
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "shop", "late").Reason).To(Equal(gatewayv1alpha1.ReasonTargetNotFound))
	}, eventually).Should(Succeed())

	routeOf := func(g Gomega) any {
		_, patches := envoyFilterIn(g, "shop", "shop", selector)
		g.Expect(patches).To(HaveLen(2))
		return patches[1]["match"].(map[string]any)["routeConfiguration"].(map[string]any)["vhost"].(map[string]any)["route"].(map[string]any)["name"]
	}
	rule := apiRule("shop", "late", "shop/shop-gateway", "/a")
	create(t, rule)
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "shop", "late").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
		g.Expect(routeOf(g)).To(Equal(gatewayv1alpha1.RouteName("shop", "late", rule.Spec.Rules[0])))
	}, eventually).Should(Succeed())

	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
	rule.Spec.Rules[0].Path = "/b"
	g.Expect(k8sClient.Update(ctx, rule)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(routeOf(g)).To(Equal(gatewayv1alpha1.RouteName("shop", "late", rule.Spec.Rules[0])))
	}, eventually).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, rule)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "shop", "late").Reason).To(Equal(gatewayv1alpha1.ReasonTargetNotFound))
	}, eventually).Should(Succeed())
	g.Eventually(gone(filterKey("shop", "shop", selector)), eventually).Should(BeTrue())
}
