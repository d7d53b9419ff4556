package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

func TestTargetKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		obj  client.Object
		want []string
	}{
		"an APIRule target": {obj: rateLimit("shop", "l", gatewayv1alpha1.TargetAPIRule, "orders", 1), want: []string{"orders"}},
		"an APIRule target with its group": {obj: withGroup(rateLimit("shop", "l", gatewayv1alpha1.TargetAPIRule, "orders", 1), gatewayv1alpha1.PorticoGatewayGroup),
			want: []string{"orders"}},
		"an Istio Gateway target":       {obj: rateLimit("shop", "l", gatewayv1alpha1.TargetGateway, "orders", 1)},
		"a Gateway API Gateway target":  {obj: withGroup(rateLimit("shop", "l", gatewayv1alpha1.TargetGateway, "orders", 1), gatewayv1alpha1.GatewayAPIGroup)},
		"an APIRule of a foreign group": {obj: withGroup(rateLimit("shop", "l", gatewayv1alpha1.TargetAPIRule, "orders", 1), "example.com")},
		"not a RateLimit":               {obj: apiRule("shop", "orders", "")},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(targetKeys(tc.obj)).To(Equal(tc.want))
		})
	}
}

func withGroup(l *gatewayv1alpha1.RateLimit, group string) *gatewayv1alpha1.RateLimit {
	l.Spec.TargetRef.Group = group
	return l
}

func TestSelectorKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		obj  client.Object
		want []string
	}{
		"one label":            {obj: gatewayIn("gw", "a", ingress), want: []string{"istio=ingressgateway"}},
		"the smallest key":     {obj: gatewayIn("gw", "a", map[string]string{"z": "1", "app": "edge", "m": "2"}), want: []string{"app=edge"}},
		"a prefixed key":       {obj: gatewayIn("gw", "a", map[string]string{"istio.io/rev": "canary", "x": "y"}), want: []string{"istio.io/rev=canary"}},
		"no selector":          {obj: gatewayIn("gw", "a", nil)},
		"an empty label value": {obj: gatewayIn("gw", "a", map[string]string{"edge": ""}), want: []string{"edge="}},
		"not an Istio Gateway": {obj: &gatewayapiv1.Gateway{}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(selectorKeys(tc.obj)).To(Equal(tc.want))
		})
	}
}

// fakeClient is a fake client with the controller's indexes.
func fakeClient(t testing.TB, funcs interceptor.Funcs, objs ...client.Object) client.Client {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, gatewayapiv1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&gatewayv1alpha1.RateLimit{}).
		WithIndex(&gatewayv1alpha1.RateLimit{}, targetIndex, targetKeys).
		WithIndex(&networkingv1.Gateway{}, selectorIndex, selectorKeys).
		WithInterceptorFuncs(funcs).Build()
}

// A pod event passes when an Istio Gateway selects the pod, found through
// the index whatever label of the pod it keys.
func TestIstioGatewaySelects(t *testing.T) {
	r := &Reconciler{Client: fakeClient(t, interceptor.Funcs{},
		gatewayIn("istio-system", "public", ingress),
		gatewayIn("team-a", "two-labels", map[string]string{"app": "edge", "tier": "a"}),
		gatewayIn("team-b", "none", nil),
	), GatewaysKnown: true}
	for name, tc := range map[string]struct {
		labels map[string]string
		want   bool
	}{
		"the ingress pods":                    {labels: map[string]string{"istio": "ingressgateway", "pod-template-hash": "1"}, want: true},
		"every label of a two-label selector": {labels: map[string]string{"tier": "a", "app": "edge", "x": "y"}, want: true},
		"one label of a two-label selector":   {labels: map[string]string{"app": "edge"}},
		"the indexed label, another value":    {labels: map[string]string{"app": "edge", "tier": "b"}},
		"an unrelated pod":                    {labels: map[string]string{"app": "shop"}},
		"a pod without labels":                {},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(r.istioGatewaySelects(context.Background(), tc.labels)).To(Equal(tc.want))
		})
	}
}

// An APIRule's event reconciles only when a RateLimit of its namespace
// targets it.
func TestTargeted(t *testing.T) {
	r := &Reconciler{Client: fakeClient(t, interceptor.Funcs{},
		rateLimit("shop", "orders", gatewayv1alpha1.TargetAPIRule, "orders", 1),
		rateLimit("shop", "gateway", gatewayv1alpha1.TargetGateway, "carts", 1),
	)}
	for name, tc := range map[string]struct {
		rule *gatewayv1alpha1.APIRule
		want []reconcile.Request
	}{
		"a target":                           {rule: apiRule("shop", "orders", ""), want: []reconcile.Request{World}},
		"an APIRule nobody targets":          {rule: apiRule("shop", "payments", "")},
		"the same name in another namespace": {rule: apiRule("team-a", "orders", "")},
		"named like a Gateway target":        {rule: apiRule("shop", "carts", "")},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(r.targeted(context.Background(), tc.rule)).To(Equal(tc.want))
		})
	}
}

func TestApiRuleEvents(t *testing.T) {
	base := apiRule("shop", "orders", "istio-system/public", "/orders/*")
	base.Spec.Rules[0].Methods = []gatewayv1alpha1.HTTPMethod{"GET"}
	edit := func(f func(a *gatewayv1alpha1.APIRule)) *gatewayv1alpha1.APIRule {
		a := base.DeepCopy()
		f(a)
		return a
	}
	p := apiRuleEvents()
	for name, tc := range map[string]struct {
		updated *gatewayv1alpha1.APIRule
		want    bool
	}{
		"its status": {updated: edit(func(a *gatewayv1alpha1.APIRule) {
			a.Status.Conditions = []metav1.Condition{{Type: gatewayv1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
		})},
		"its labels":       {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Labels = map[string]string{"team": "a"} })},
		"its service":      {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.Service.Port = 9090 })},
		"a rule's access":  {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.Rules[0].NoAuth = ptr.To(false) })},
		"a rule's path":    {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.Rules[0].Path = "/v2/*" }), want: true},
		"a rule's methods": {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.Rules[0].Methods = nil }), want: true},
		"another rule": {updated: edit(func(a *gatewayv1alpha1.APIRule) {
			a.Spec.Rules = append(a.Spec.Rules, gatewayv1alpha1.Rule{Path: "/x"})
		}), want: true},
		"its gateway":   {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.Gateway = "istio-system/private" }), want: true},
		"its hosts":     {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.Hosts = append(a.Spec.Hosts, "b.example.com") }), want: true},
		"its parentRef": {updated: edit(func(a *gatewayv1alpha1.APIRule) { a.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Name: "edge"} }), want: true},
		"its parentRef and its label": {updated: edit(func(a *gatewayv1alpha1.APIRule) {
			a.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Name: "edge"}
			a.Labels = nil
		}), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: tc.updated})).To(Equal(tc.want))
			// The cache holds stripped APIRules: the verdict is the same on them.
			oldStripped, err := StripAPIRule(base)
			g.Expect(err).NotTo(HaveOccurred())
			newStripped, err := StripAPIRule(tc.updated)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Update(event.UpdateEvent{ObjectOld: oldStripped.(client.Object), ObjectNew: newStripped.(client.Object)})).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(p.Create(event.CreateEvent{Object: base})).To(BeTrue())
	g.Expect(p.Delete(event.DeleteEvent{Object: base})).To(BeTrue())
}

// The cached APIRule keeps what the topology reads, so it computes the
// same routes from it, and nothing of the status.
func TestStripAPIRule(t *testing.T) {
	g := NewWithT(t)
	a := apiRule("shop", "orders", "", "/orders/*", "/carts")
	a.UID, a.ResourceVersion, a.Generation = "uid", "7", 3
	a.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}
	a.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Name: "edge"}
	a.Spec.Rules[0].Methods = []gatewayv1alpha1.HTTPMethod{"GET", "POST"}
	a.Status.Conditions = []metav1.Condition{{Type: gatewayv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Message: "served"}}

	out, err := StripAPIRule(a)
	g.Expect(err).NotTo(HaveOccurred())
	s := out.(*gatewayv1alpha1.APIRule)
	g.Expect(s.Status).To(BeZero())
	g.Expect(s.Annotations).To(BeNil())
	g.Expect(s.Spec.Service).To(BeNil())
	g.Expect(s.ObjectMeta).To(Equal(metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "uid", ResourceVersion: "7", Generation: 3}))
	stripped, whole := targetOf(s, "", false), targetOf(a, "", false)
	g.Expect(stripped.Rules).To(HaveLen(len(whole.Rules)))
	stripped.Rules, whole.Rules = nil, nil
	g.Expect(stripped).To(Equal(whole))
	// The rules keep what names their Envoy routes.
	for i := range a.Spec.Rules {
		g.Expect(gatewayv1alpha1.RouteName("shop", "orders", s.Spec.Rules[i])).To(Equal(gatewayv1alpha1.RouteName("shop", "orders", a.Spec.Rules[i])))
		g.Expect(gatewayv1alpha1.HTTPRouteRuleName("shop", "orders", s.Spec.Rules[i])).To(Equal(gatewayv1alpha1.HTTPRouteRuleName("shop", "orders", a.Spec.Rules[i])))
	}
	tombstone := "tombstone"
	passed, err := StripAPIRule(tombstone)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(passed).To(Equal(tombstone))
}

func TestTargetOf(t *testing.T) {
	withParent := func(a *gatewayv1alpha1.APIRule, ns string) *gatewayv1alpha1.APIRule {
		a.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Namespace: ns, Name: "edge"}
		return a
	}
	host := []string{"orders.shop.example.com"}
	for name, tc := range map[string]struct {
		rule              *gatewayv1alpha1.APIRule
		defaultGateway    string
		defaultGatewayAPI bool
		want              topology.APIRule
	}{
		"its Istio Gateway": {rule: apiRule("shop", "orders", "istio-system/public"), defaultGateway: "istio-system/default",
			want: topology.APIRule{Namespace: "shop", Name: "orders", Gateway: "istio-system/public"}},
		"the default Istio Gateway": {rule: apiRule("shop", "orders", ""), defaultGateway: "istio-system/default",
			want: topology.APIRule{Namespace: "shop", Name: "orders", Gateway: "istio-system/default"}},
		"no default gateway": {rule: apiRule("shop", "orders", ""),
			want: topology.APIRule{Namespace: "shop", Name: "orders"}},
		"the default Gateway API Gateway": {rule: apiRule("shop", "orders", ""), defaultGateway: "gateways/default", defaultGatewayAPI: true,
			want: topology.APIRule{Namespace: "shop", Name: "orders", ParentRef: &types.NamespacedName{Namespace: "gateways", Name: "default"}, Hosts: host}},
		"its parentRef, namespace defaulted": {rule: withParent(apiRule("shop", "orders", ""), ""), defaultGateway: "istio-system/default",
			want: topology.APIRule{Namespace: "shop", Name: "orders", ParentRef: &types.NamespacedName{Namespace: "shop", Name: "edge"}, Hosts: host}},
		"its parentRef in another namespace": {rule: withParent(apiRule("shop", "orders", ""), "gateways"),
			want: topology.APIRule{Namespace: "shop", Name: "orders", ParentRef: &types.NamespacedName{Namespace: "gateways", Name: "edge"}, Hosts: host}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(targetOf(tc.rule, tc.defaultGateway, tc.defaultGatewayAPI)).To(Equal(tc.want))
		})
	}
}

// A reconcile reads the APIRules RateLimits target, one Get each, and
// lists none: the other APIRules of the cluster cost it nothing.
func TestReconcileGetsOnlyTargetedAPIRules(t *testing.T) {
	g := NewWithT(t)
	var gets []string
	apiRuleLists := 0
	objs := []client.Object{
		gatewayIn("istio-system", "public", ingress),
		apiRule("shop", "orders", "istio-system/public", "/orders"),
		apiRule("shop", "carts", "istio-system/public", "/carts"),
		apiRule("team-a", "orders", "istio-system/public", "/orders"),
		rateLimit("shop", "orders", gatewayv1alpha1.TargetAPIRule, "orders", 1),
		rateLimit("shop", "orders-again", gatewayv1alpha1.TargetAPIRule, "orders", 1),
		rateLimit("shop", "stray", gatewayv1alpha1.TargetAPIRule, "missing", 1),
	}
	c := fakeClient(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*gatewayv1alpha1.APIRule); ok {
				gets = append(gets, key.String())
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*gatewayv1alpha1.APIRuleList); ok {
				apiRuleLists++
			}
			return c.List(ctx, list, opts...)
		},
	}, objs...)
	r := &Reconciler{Client: c, Reader: c, GatewaysKnown: true, APIRulesKnown: true, RootNamespace: topology.DefaultRootNamespace}
	err := converge(context.Background(), r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gets).To(ConsistOf("shop/orders", "shop/missing"))
	g.Expect(apiRuleLists).To(BeZero())
	stray := &gatewayv1alpha1.RateLimit{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "stray"}, stray)).To(Succeed())
	g.Expect(stray.Status.Conditions).To(ContainElement(HaveField("Reason", gatewayv1alpha1.ReasonTargetNotFound)))
}
