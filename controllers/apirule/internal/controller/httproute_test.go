package controller

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// The golden outputs of the translation are what the controller writes:
// the real Gateway API and Istio CRDs (their schemas and CEL rules) must
// admit them, in both modes (the VirtualService or the HTTPRoute, and the
// access policies).
func TestGoldenObjectsAreAdmitted(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "translate", "testdata", "*.golden.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(paths).NotTo(BeEmpty())
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			var golden struct {
				VirtualService *networkingv1.VirtualService
				HTTPRoute      *gwapiv1.HTTPRoute
				Workloads      []struct {
					AuthorizationPolicy   *securityv1.AuthorizationPolicy
					RequestAuthentication *securityv1.RequestAuthentication
					CustomPolicy          *securityv1.AuthorizationPolicy
				}
			}
			g.Expect(yaml.Unmarshal(raw, &golden)).To(Succeed())
			var objs []client.Object
			switch {
			case golden.HTTPRoute != nil:
				objs = append(objs, golden.HTTPRoute)
			case golden.VirtualService != nil:
				objs = append(objs, golden.VirtualService)
			}
			g.Expect(objs).To(HaveLen(1), "a golden output has a route")
			for _, w := range golden.Workloads {
				objs = append(objs, w.AuthorizationPolicy)
				if w.RequestAuthentication != nil {
					objs = append(objs, w.RequestAuthentication)
				}
				if w.CustomPolicy != nil {
					objs = append(objs, w.CustomPolicy)
				}
			}
			for _, obj := range objs {
				obj.SetOwnerReferences(nil) // the golden owner does not exist
				g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed(), "%T %s", obj, obj.GetName())
			}
		})
	}
}

func createGatewayAPIGateway(t *testing.T, name string) {
	t.Helper()
	gw := &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "e2e", Listeners: []gwapiv1.Listener{{
			Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType,
		}}},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), gw)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), gw) })
}

func createRouteAPIRule(t *testing.T, name, service, gateway string, rules ...porticov1alpha1.Rule) {
	t.Helper()
	r := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts:     []porticov1alpha1.Hostname{porticov1alpha1.Hostname(name + ".example.com")},
			ParentRef: &porticov1alpha1.ParentReference{Name: gateway},
			Service:   &porticov1alpha1.ServiceReference{Name: service, Port: 8080},
			Rules:     rules,
		},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), r)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), r) })
}

// answer writes the route status a Gateway's controller would: one parent
// entry for the route's parentRef with Accepted and ResolvedRefs.
func answer(g Gomega, name string, accepted metav1.ConditionStatus, reason string) {
	route := &gwapiv1.HTTPRoute{}
	get(g, name, route)
	cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: "by the test's gateway", ObservedGeneration: route.Generation, LastTransitionTime: metav1.Now()}
	}
	route.Status.Parents = []gwapiv1.RouteParentStatus{{
		ParentRef: route.Spec.ParentRefs[0], ControllerName: "example.com/test-gateway",
		Conditions: []metav1.Condition{cond("Accepted", accepted, reason), cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")},
	}}
	g.Expect(k8sClient.Status().Update(context.Background(), route)).To(Succeed())
}

func TestHTTPRouteMode(t *testing.T) {
	g := NewWithT(t)
	createService(t, "catalog")
	createGatewayAPIGateway(t, "edge")
	createRouteAPIRule(t, "catalog", "catalog", "edge", health)

	// The route and the access policy are written; no VirtualService. The
	// APIRule waits for the Gateway's answer.
	g.Eventually(func(g Gomega) {
		route := &gwapiv1.HTTPRoute{}
		get(g, "catalog", route)
		g.Expect(route.Spec.Hostnames).To(ConsistOf(gwapiv1.Hostname("catalog.example.com")))
		g.Expect(route.Spec.ParentRefs).To(HaveLen(1))
		g.Expect(string(route.Spec.ParentRefs[0].Name)).To(Equal("edge"))
		get(g, "catalog", &securityv1.AuthorizationPolicy{})
		c := readyCondition(g, "catalog")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonRoutePending), c.Message)
	}, eventually).Should(Succeed())
	g.Expect(gone("catalog", &networkingv1.VirtualService{})()).To(BeTrue())

	// Accepted: Ready, from the route's status change alone.
	answer(g, "catalog", metav1.ConditionTrue, "Accepted")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "catalog")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(c.Message).To(ContainSubstring("HTTPRoute shop/catalog"))
	}, eventually).Should(Succeed())

	// Refused by the Gateway: the APIRule says who and why.
	answer(g, "catalog", metav1.ConditionFalse, "NotAllowedByListeners")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "catalog")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonRouteNotAccepted))
		g.Expect(c.Message).To(And(ContainSubstring("shop/edge"), ContainSubstring("NotAllowedByListeners"), ContainSubstring("example.com/test-gateway")))
	}, eventually).Should(Succeed())

	// A spec change makes the answer stale: pending until the Gateway
	// answers for the new generation.
	answer(g, "catalog", metav1.ConditionTrue, "Accepted")
	g.Eventually(func(g Gomega) { g.Expect(readyCondition(g, "catalog").Status).To(Equal(metav1.ConditionTrue)) }, eventually).Should(Succeed())
	updateAPIRule(t, "catalog", func(r *porticov1alpha1.APIRule) { r.Spec.Timeout = &metav1.Duration{Duration: 3e9} })
	g.Eventually(func(g Gomega) {
		route := &gwapiv1.HTTPRoute{}
		get(g, "catalog", route)
		g.Expect(route.Spec.Rules[0].Timeouts).NotTo(BeNil())
		g.Expect(readyCondition(g, "catalog").Reason).To(Equal(porticov1alpha1.ReasonRoutePending))
	}, eventually).Should(Succeed())
	route := &gwapiv1.HTTPRoute{}
	get(g, "catalog", route)
	generation := route.Generation

	// Back to an Istio Gateway: the HTTPRoute goes, the VirtualService comes.
	updateAPIRule(t, "catalog", func(r *porticov1alpha1.APIRule) {
		r.Spec.ParentRef, r.Spec.Gateway = nil, "istio-system/public"
	})
	g.Eventually(func(g Gomega) {
		get(g, "catalog", &networkingv1.VirtualService{})
		g.Expect(gone("catalog", &gwapiv1.HTTPRoute{})()).To(BeTrue())
		g.Expect(readyCondition(g, "catalog").Status).To(Equal(metav1.ConditionTrue))
	}, eventually).Should(Succeed())
	g.Expect(generation).To(Equal(int64(2)), "one spec update for one APIRule change: the controller writes the route as the API server keeps it")
}

func TestHTTPRouteModeGatewayNotFound(t *testing.T) {
	g := NewWithT(t)
	createService(t, "basket")
	createRouteAPIRule(t, "basket", "basket", "nowhere", health)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "basket")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonGatewayNotFound))
		g.Expect(c.Message).To(ContainSubstring("Gateway API Gateway shop/nowhere"))
	}, eventually).Should(Succeed())
	createGatewayAPIGateway(t, "nowhere")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "basket").Reason).To(Equal(porticov1alpha1.ReasonRoutePending), readyMessage(t, "basket"))
	}, eventually).Should(Succeed())
}

// In HTTPRoute mode another namespace consents with a ReferenceGrant; the
// Service annotation of Istio mode does not count, and a grant withdrawn
// removes the route.
func TestHTTPRouteModeReferenceGrant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createServiceIn(t, otherNS, "ledger", map[string]string{porticov1alpha1.AnnotationAllowedAPIRuleNamespaces: ns})
	createGatewayAPIGateway(t, "ledger-edge")
	createRouteAPIRule(t, "ledger", "ledger", "ledger-edge", porticov1alpha1.Rule{
		Path: "/entries", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "ledger", Namespace: otherNS, Port: 8080},
	})
	notPermitted := func(g Gomega) {
		c := readyCondition(g, "ledger")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonReferenceNotPermitted))
		g.Expect(c.Message).To(ContainSubstring("ReferenceGrant"))
		g.Expect(gone("ledger", &gwapiv1.HTTPRoute{})()).To(BeTrue())
	}
	g.Eventually(notPermitted, eventually).Should(Succeed())

	grant := func(from, service string) *gwapiv1beta1.ReferenceGrant {
		rg := &gwapiv1beta1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "grant-", Namespace: otherNS},
			Spec: gwapiv1beta1.ReferenceGrantSpec{
				From: []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: gwapiv1.Namespace(from)}},
				To:   []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr.To(gwapiv1.ObjectName(service))}},
			},
		}
		g.Expect(k8sClient.Create(ctx, rg)).To(Succeed())
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, rg) })
		return rg
	}
	// A grant for another namespace, or another Service, is not consent.
	grant("someone-else", "ledger")
	grant(ns, "other-service")
	g.Consistently(notPermitted, "2s").Should(Succeed())

	rg := grant(ns, "ledger")
	g.Eventually(func(g Gomega) {
		route := &gwapiv1.HTTPRoute{}
		get(g, "ledger", route)
		g.Expect(route.Spec.Rules[0].BackendRefs[0].Namespace).To(Equal(ptr.To(gwapiv1.Namespace(otherNS))))
		g.Expect(readyCondition(g, "ledger").Reason).To(Equal(porticov1alpha1.ReasonRoutePending))
	}, eventually).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, rg)).To(Succeed())
	g.Eventually(notPermitted, eventually).Should(Succeed())
}

func readyMessage(t *testing.T, name string) string {
	r := &porticov1alpha1.APIRule{}
	_ = k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r)
	for _, c := range r.Status.Conditions {
		return c.Message
	}
	return ""
}

// An HTTPRoute that Portico did not write, claiming an APIRule's host on
// its Gateway, is reported on the APIRule (HostShared), and the report
// ends when the route goes.
func TestHTTPRouteModeReportsForeignRoutes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createService(t, "wishlist")
	createGatewayAPIGateway(t, "shared-edge")
	createRouteAPIRule(t, "wishlist", "wishlist", "shared-edge", health)
	shared := func(g Gomega) *metav1.Condition {
		r := &porticov1alpha1.APIRule{}
		get(g, "wishlist", r)
		c := meta.FindStatusCondition(r.Status.Conditions, porticov1alpha1.ConditionHostShared)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Eventually(func(g Gomega) { g.Expect(shared(g).Status).To(Equal(metav1.ConditionFalse)) }, eventually).Should(Succeed())

	foreign := func(name string, hostnames []gwapiv1.Hostname, gateway string) *gwapiv1.HTTPRoute {
		route := &gwapiv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: gwapiv1.HTTPRouteSpec{
				CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: gwapiv1.ObjectName(gateway)}}},
				Hostnames:       hostnames,
			},
		}
		g.Expect(k8sClient.Create(ctx, route)).To(Succeed())
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, route) })
		return route
	}
	// Another host, or the same host on another Gateway: nothing shared.
	foreign("elsewhere", []gwapiv1.Hostname{"wishlist.example.com"}, "other-edge")
	foreign("other-host", []gwapiv1.Hostname{"basket.example.com"}, "shared-edge")
	g.Consistently(func(g Gomega) { g.Expect(shared(g).Status).To(Equal(metav1.ConditionFalse)) }, "2s").Should(Succeed())

	// A wildcard over the host on the same Gateway: reported, by name.
	wildcard := foreign("catch-all", []gwapiv1.Hostname{"*.example.com"}, "shared-edge")
	g.Eventually(func(g Gomega) {
		c := shared(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonForeignRoute))
		g.Expect(c.Message).To(And(ContainSubstring("catch-all"), ContainSubstring("shop/shared-edge")))
	}, eventually).Should(Succeed())
	g.Expect(k8sClient.Delete(ctx, wildcard)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(shared(g).Status).To(Equal(metav1.ConditionFalse)) }, eventually).Should(Succeed())

	// A route without hostnames serves every host of the Gateway.
	foreign("no-hostnames", nil, "shared-edge")
	g.Eventually(func(g Gomega) { g.Expect(shared(g).Message).To(ContainSubstring("no-hostnames")) }, eventually).Should(Succeed())
}

// What the Gateway API's CRD refuses in the HTTPRoute (a CORS header name
// with a space, which an APIRule admits) is InvalidRule, not a retry loop.
func TestHTTPRouteModeInvalidRoute(t *testing.T) {
	g := NewWithT(t)
	createService(t, "reviews")
	createGatewayAPIGateway(t, "reviews-edge")
	createRouteAPIRule(t, "reviews", "reviews", "reviews-edge", health)
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, "reviews").Reason).To(Equal(porticov1alpha1.ReasonRoutePending))
	}, eventually).Should(Succeed())
	updateAPIRule(t, "reviews", func(r *porticov1alpha1.APIRule) {
		r.Spec.CORS = &porticov1alpha1.CORSPolicy{AllowOrigins: []string{"https://shop.example.com"}, AllowHeaders: []string{"X Bad Header"}}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "reviews")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonInvalidRule), c.Message)
		g.Expect(c.Message).To(ContainSubstring("allowHeaders"))
	}, eventually).Should(Succeed())
	route := &gwapiv1.HTTPRoute{}
	get(g, "reviews", route)
	g.Expect(route.Spec.Rules[0].Filters).To(BeEmpty(), "the route was left as it was")
}

// With the default gateway a Gateway API Gateway, an APIRule naming no
// gateway becomes an HTTPRoute on its https listener, and moves back to a
// VirtualService when the administrator switches the default gateway back.
func TestDefaultGatewayAPIGateway(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Cleanup(func() {
		_ = k8sClient.Delete(ctx, &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}})
	})
	setDefaultGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "gwapi.example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{}})
	createService(t, "dflt-route")
	defaultGatewayRule(t, "dflt-route", "dflt-route", "dflt-route.gwapi.example.com")
	c := expectReason(t, ns, "dflt-route", porticov1alpha1.ReasonGatewayNotFound)
	g.Expect(c.Message).To(ContainSubstring("Gateway API Gateway istio-system/portico-gateway"))

	// As the gateway controller would.
	gw := &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.DefaultGatewayName, Namespace: operatorv1alpha1.DefaultGatewayNamespace},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gwapiv1.Listener{{
			Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
			TLS: &gwapiv1.ListenerTLSConfig{CertificateRefs: []gwapiv1.SecretObjectReference{{Name: "portico-gateway-tls"}}},
		}}},
	}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, gw) })
	g.Eventually(func(g Gomega) {
		route := &gwapiv1.HTTPRoute{}
		get(g, "dflt-route", route)
		g.Expect(route.Spec.ParentRefs).To(HaveLen(1))
		ref := route.Spec.ParentRefs[0]
		g.Expect(string(*ref.Namespace) + "/" + string(ref.Name) + "/" + string(*ref.SectionName)).To(Equal("istio-system/portico-gateway/https"))
		g.Expect(readyCondition(g, "dflt-route").Reason).To(Equal(porticov1alpha1.ReasonRoutePending))
	}, eventually).Should(Succeed())
	g.Expect(gone("dflt-route", &networkingv1.VirtualService{})()).To(BeTrue())

	// Back to an Istio default gateway: once it exists, the VirtualService
	// replaces the HTTPRoute (until then the objects stay as they were).
	setDefaultGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "gwapi.example.com"})
	expectReason(t, ns, "dflt-route", porticov1alpha1.ReasonGatewayNotFound)
	istioGW := &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.DefaultGatewayName, Namespace: operatorv1alpha1.DefaultGatewayNamespace},
		Spec: networkingv1alpha3.Gateway{Selector: map[string]string{"istio": "ingressgateway"}, Servers: []*networkingv1alpha3.Server{{
			Port: &networkingv1alpha3.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*.gwapi.example.com"},
		}}},
	}
	g.Expect(k8sClient.Create(ctx, istioGW)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, istioGW) })
	g.Eventually(func(g Gomega) {
		get(g, "dflt-route", &networkingv1.VirtualService{})
		g.Expect(gone("dflt-route", &gwapiv1.HTTPRoute{})()).To(BeTrue())
		g.Expect(readyCondition(g, "dflt-route").Reason).To(Equal(porticov1alpha1.ReasonApplied))
	}, eventually).Should(Succeed())
}
