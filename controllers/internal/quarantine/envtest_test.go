package quarantine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		// Only the CRDs of the kinds the test uses.
		WithoutProjectCRDs: true,
		CRDs:               testCRDs,
		AddToScheme:        kinds,
		Setup: func(_ context.Context, e *testenv.Env) error {
			env = e
			return nil
		},
	}))
}

// testCRDs are the APIRule CRD and Istio's, the VirtualService's without a
// schema for its spec.
func testCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := testenv.IstioCRDs()
	if err != nil {
		return nil, err
	}
	apiRules, err := testenv.ReadCRDs(filepath.Join(testenv.ProjectCRDPaths()[0], "gateway.portico.dev_apirules.yaml"))
	if err != nil {
		return nil, err
	}
	crds = append(crds, apiRules...)
	for _, crd := range crds {
		if crd.Name == "virtualservices.networking.istio.io" {
			withoutSpecSchema(crd)
		}
	}
	return crds, nil
}

// withoutSpecSchema lets a CRD store any spec, as Istio's CRDs did before
// they carried a schema (validation was a webhook's): then a spec that Go
// cannot decode reaches the API server too.
func withoutSpecSchema(crd *apiextensionsv1.CustomResourceDefinition) {
	for i := range crd.Spec.Versions {
		schema := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
		schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		schema.XValidations = nil
	}
}

// safety bounds the waits of the envtest test; nothing is asserted about
// how long anything takes.
const safety = 2 * time.Minute

var (
	apiRuleGVK        = porticov1alpha1.GroupVersion.WithKind("APIRule")
	gatewayGVK        = networkingv1.SchemeGroupVersion.WithKind("Gateway")
	virtualServiceGVK = networkingv1.SchemeGroupVersion.WithKind("VirtualService")
)

// tenant holds the objects of the test and a client that bypasses the guard,
// as a tenant's writes do.
type tenant struct {
	t   *testing.T
	ctx context.Context
	raw client.Client
	ns  string
}

func (tn tenant) create(obj client.Object) {
	tn.t.Helper()
	obj.SetNamespace(tn.ns)
	NewWithT(tn.t).Expect(tn.raw.Create(tn.ctx, obj)).To(Succeed())
}

// patch merge-patches an object, or its status, as unstructured JSON so that
// values Go cannot decode reach the API server and nothing decodes the answer.
func (tn tenant) patch(gvk schema.GroupVersionKind, name, patch string, status bool) {
	tn.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(tn.ns)
	u.SetName(name)
	p := client.RawPatch(types.MergePatchType, []byte(patch))
	var err error
	if status {
		err = tn.raw.Status().Patch(tn.ctx, u, p)
	} else {
		err = tn.raw.Patch(tn.ctx, u, p)
	}
	NewWithT(tn.t).Expect(err).NotTo(HaveOccurred(), "%s %s: %s", gvk.Kind, name, patch)
}

func newAPIRule(name string) *porticov1alpha1.APIRule {
	return &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts:   []porticov1alpha1.Hostname{porticov1alpha1.Hostname(name + ".example.com")},
			Gateway: "istio-system/public",
			Service: &porticov1alpha1.ServiceReference{Name: "backend", Port: 8080},
			Rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}},
		},
	}
}

func newGateway(name string) *networkingv1.Gateway {
	return &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1alpha3.Gateway{Selector: map[string]string{"istio": "ingressgateway"}, Servers: []*networkingv1alpha3.Server{{
			Port: &networkingv1alpha3.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
		}}},
	}
}

func newVirtualService(name string) *networkingv1.VirtualService {
	return &networkingv1.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1alpha3.VirtualService{
			Hosts: []string{name + ".example.com"},
			Http: []*networkingv1alpha3.HTTPRoute{{
				Route:   []*networkingv1alpha3.HTTPRouteDestination{{Destination: &networkingv1alpha3.Destination{Host: "backend"}}},
				Retries: &networkingv1alpha3.HTTPRetry{Attempts: 2},
			}},
		},
	}
}

const (
	badCondition = `{"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True",` +
		`"reason":"Applied","message":"","lastTransitionTime":"2026-01-01T00:00:00z"}]}}`
	goodCondition = `{"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True",` +
		`"reason":"Applied","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	badGeneration  = `{"status":{"observedGeneration":"not-a-number"}}`
	goodGeneration = `{"status":{"observedGeneration":"1"}}`
	// badAttempts is no int32; only a CRD without a spec schema admits it.
	badAttempts  = `{"spec":{"http":[{"route":[{"destination":{"host":"backend"}}],"retries":{"attempts":"three"}}]}}`
	goodAttempts = `{"spec":{"http":[{"route":[{"destination":{"host":"backend"}}],"retries":{"attempts":3}}]}}`
)

// setUpTenant creates, through the raw client, good objects and objects that
// do not decode: a lower-case z lastTransitionTime on an APIRule, a
// non-numeric observedGeneration on an Istio Gateway and VirtualService (all
// admitted by the real CRDs), and a VirtualService spec beyond its Go type
// (admitted by a CRD without a spec schema).
func setUpTenant(t *testing.T, ctx context.Context, cfg *rest.Config) tenant {
	g := NewWithT(t)
	raw, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	tn := tenant{t: t, ctx: ctx, raw: raw, ns: fmt.Sprintf("tenant-%d", time.Now().UnixNano())}
	g.Expect(raw.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.ns}})).To(Succeed())

	for _, name := range []string{"good-rule", "bad-rule"} {
		tn.create(newAPIRule(name))
	}
	for _, name := range []string{"good-gw", "bad-gw"} {
		tn.create(newGateway(name))
	}
	for _, name := range []string{"good-vs", "bad-vs", "broken-vs"} {
		tn.create(newVirtualService(name))
	}
	tn.patch(apiRuleGVK, "good-rule", goodCondition, true)
	tn.patch(apiRuleGVK, "bad-rule", badCondition, true)
	tn.patch(gatewayGVK, "good-gw", goodGeneration, true)
	tn.patch(gatewayGVK, "bad-gw", badGeneration, true)
	tn.patch(virtualServiceGVK, "good-vs", goodGeneration, true)
	tn.patch(virtualServiceGVK, "bad-vs", badGeneration, true)
	tn.patch(virtualServiceGVK, "broken-vs", badAttempts, false)
	return tn
}

// lists lists the three kinds in the tenant's namespace.
func lists(ctx context.Context, c client.Reader, ns string) (*porticov1alpha1.APIRuleList, *networkingv1.GatewayList, *networkingv1.VirtualServiceList, error) {
	rules, gws, vss := &porticov1alpha1.APIRuleList{}, &networkingv1.GatewayList{}, &networkingv1.VirtualServiceList{}
	for _, l := range []client.ObjectList{rules, gws, vss} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, nil, nil, err
		}
	}
	return rules, gws, vss, nil
}

// hasStatus maps the names listed to whether they kept their status.
func hasStatus(rules *porticov1alpha1.APIRuleList, gws *networkingv1.GatewayList, vss *networkingv1.VirtualServiceList) map[string]bool {
	seen := map[string]bool{}
	for _, r := range rules.Items {
		seen[r.Name] = len(r.Status.Conditions) > 0
	}
	for _, gw := range gws.Items {
		seen[gw.Name] = gw.Status.ObservedGeneration != 0
	}
	for _, vs := range vss.Items {
		seen[vs.Name] = vs.Status.ObservedGeneration != 0
	}
	return seen
}

// counter reads the quarantine counter of one kind and reason.
func counter(t *testing.T, gvk schema.GroupVersionKind, reason Reason) float64 {
	return value(t, quarantined.WithLabelValues(gvk.Group, gvk.Kind, string(reason)))
}

func TestUndecodableObjectsDoNotStopClients(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	cfg := env.Config
	tn := setUpTenant(t, ctx, cfg)
	want := map[string]bool{
		"good-rule": true, "bad-rule": false, "good-gw": true, "bad-gw": false, "good-vs": true, "bad-vs": false,
	}

	// Without the guard, the typed List of each kind fails.
	for _, l := range []client.ObjectList{&porticov1alpha1.APIRuleList{}, &networkingv1.GatewayList{}, &networkingv1.VirtualServiceList{}} {
		g.Expect(tn.raw.List(ctx, l, client.InNamespace(tn.ns))).NotTo(Succeed(), "%T", l)
	}

	// With the guard: every list succeeds, bad statuses are gone, the bad
	// spec is left out, and each object is reported.
	before := map[string]float64{
		"rule": counter(t, apiRuleGVK, StatusRemoved), "gw": counter(t, gatewayGVK, StatusRemoved),
		"vs": counter(t, virtualServiceGVK, StatusRemoved), "dropped": counter(t, virtualServiceGVK, Dropped),
	}
	var mu sync.Mutex
	hooked := map[string]Reason{}
	guard := New(env.Scheme, Options{OnQuarantine: func(r Report) {
		mu.Lock()
		defer mu.Unlock()
		hooked[r.Namespace+"/"+r.Name] = r.Reason
	}})
	guarded := rest.CopyConfig(cfg)
	guarded.Wrap(guard.Wrap)
	c, err := client.New(guarded, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	rules, gws, vss, err := lists(ctx, c, tn.ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hasStatus(rules, gws, vss)).To(Equal(want))

	g.Expect(counter(t, apiRuleGVK, StatusRemoved)).To(Equal(before["rule"] + 1))
	g.Expect(counter(t, gatewayGVK, StatusRemoved)).To(Equal(before["gw"] + 1))
	g.Expect(counter(t, virtualServiceGVK, StatusRemoved)).To(Equal(before["vs"] + 1))
	g.Expect(counter(t, virtualServiceGVK, Dropped)).To(Equal(before["dropped"] + 1))
	mu.Lock()
	g.Expect(hooked).To(Equal(map[string]Reason{
		tn.ns + "/bad-rule": StatusRemoved, tn.ns + "/bad-gw": StatusRemoved,
		tn.ns + "/bad-vs": StatusRemoved, tn.ns + "/broken-vs": Dropped,
	}))
	mu.Unlock()

	// A single GET of the bad spec fails for that object only; the bad status
	// is read without it.
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "broken-vs"}, &networkingv1.VirtualService{})).NotTo(Succeed())
	rule := &porticov1alpha1.APIRule{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "bad-rule"}, rule)).To(Succeed())
	g.Expect(rule.Status.Conditions).To(BeEmpty())

	testCacheSyncsAndFollows(t, ctx, guarded, tn, want)
}

// events records the names an informer adds and deletes.
type events chan string

func (e events) handler() toolscache.ResourceEventHandlerFuncs {
	name := func(obj any) string {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		return obj.(client.Object).GetName()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e <- "add " + name(obj) },
		DeleteFunc: func(obj any) { e <- "delete " + name(obj) },
	}
}

// await reads events until want comes; the test's context bounds the wait.
func (e events) await(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	for {
		select {
		case got := <-e:
			if got == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %q: %v", want, ctx.Err())
		}
	}
}

// testCacheSyncsAndFollows checks that a manager's cache built on the
// guarded config syncs, holds every decodable object, sees an object created
// later, and forgets an object whose spec turns undecodable.
func testCacheSyncsAndFollows(t *testing.T, ctx context.Context, cfg *rest.Config, tn tenant, want map[string]bool) {
	g := NewWithT(t)
	mgr := startManager(t, ctx, cfg, cache.Options{})

	ruleEvents, vsEvents := make(events, 100), make(events, 100)
	for obj, ev := range map[client.Object]events{&porticov1alpha1.APIRule{}: ruleEvents, &networkingv1.VirtualService{}: vsEvents} {
		informer, err := mgr.GetCache().GetInformer(ctx, obj) // waits for the sync
		g.Expect(err).NotTo(HaveOccurred())
		_, err = informer.AddEventHandler(ev.handler())
		g.Expect(err).NotTo(HaveOccurred())
	}
	rules, gws, vss, err := lists(ctx, mgr.GetCache(), tn.ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hasStatus(rules, gws, vss)).To(Equal(want))

	tn.create(newAPIRule("late-rule"))
	ruleEvents.await(t, ctx, "add late-rule")

	// A good object turning undecodable leaves the cache; fixed, it returns.
	vsEvents.await(t, ctx, "add good-vs")
	tn.patch(virtualServiceGVK, "good-vs", badAttempts, false)
	vsEvents.await(t, ctx, "delete good-vs")
	tn.patch(virtualServiceGVK, "good-vs", goodAttempts, false)
	vsEvents.await(t, ctx, "add good-vs")
}

// startManager starts a manager on cfg with the given cache options until
// the test ends, and returns it once its cache runs.
func startManager(t *testing.T, ctx context.Context, cfg *rest.Config, cacheOpts cache.Options) ctrl.Manager {
	t.Helper()
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: cacheOpts,
	})
	g.Expect(err).NotTo(HaveOccurred())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Logf("manager stopped: %v", err)
		}
	})
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue()) // returns once the cache runs
	return mgr
}
