package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/explain"
)

const gateway = "istio-system/portico-gateway"

func vs(ns, host, svc string) *networkingv1.VirtualService {
	return &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc}, Spec: networkingv1alpha3.VirtualService{
		Gateways: []string{gateway}, Hosts: []string{host},
		Http: []*networkingv1alpha3.HTTPRoute{{Name: svc, Route: []*networkingv1alpha3.HTTPRouteDestination{{
			Destination: &networkingv1alpha3.Destination{Host: svc + "." + ns + ".svc.cluster.local", Port: &networkingv1alpha3.PortSelector{Number: 8080}},
		}}}},
	}}
}

func svc(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}}}
}

// cluster holds team-a's ledger (open /health, /admin for tokens of its
// issuer) and team-b's shop, whose host team-a also claimed too late.
func cluster(namespaceOnly string) client.Client {
	sel := &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "ledger"}}
	ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger"}, Spec: securityv1beta1.AuthorizationPolicy{
		Selector: sel, Action: securityv1beta1.AuthorizationPolicy_ALLOW, Rules: []*securityv1beta1.Rule{
			{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Paths: []string{"/health"}}}}},
			{
				To:   []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Paths: []string{"/admin"}}}},
				From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{RequestPrincipals: []string{"https://idp.a/*"}}}},
			},
		},
	}}
	ra := &securityv1.RequestAuthentication{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger"}, Spec: securityv1beta1.RequestAuthentication{
		Selector: sel, JwtRules: []*securityv1beta1.JWTRule{{Issuer: "https://idp.a", JwksUri: "https://idp.a/jwks"}},
	}}
	late := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "late"}, Spec: gatewayv1alpha1.APIRuleSpec{Hosts: []gatewayv1alpha1.Hostname{"shop.b.example"}},
		Status: gatewayv1alpha1.APIRuleStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: gatewayv1alpha1.ReasonHostOccupied}}}}
	// The ledger's VirtualService as the apirule controller writes it for
	// APIRule team-a/ledger, whose RateLimit gives /admin a bucket of its own.
	ledger := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger", UID: "uid-ledger"},
		Spec: gatewayv1alpha1.APIRuleSpec{Hosts: []gatewayv1alpha1.Hostname{"ledger.a.example"}, Rules: []gatewayv1alpha1.Rule{{Path: "/*"}}}}
	ledgerVS := vs("team-a", "ledger.a.example", "ledger")
	ledgerVS.Spec.Http[0].Name = gatewayv1alpha1.RouteName("team-a", "ledger", ledger.Spec.Rules[0])
	ledgerVS.OwnerReferences = []metav1.OwnerReference{{APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "APIRule", Name: "ledger", UID: ledger.UID, Controller: new(true)}}
	bucket := func(n int64) *gatewayv1alpha1.TokenBucket {
		return &gatewayv1alpha1.TokenBucket{MaxTokens: n, TokensPerFill: n, FillInterval: metav1.Duration{Duration: time.Minute}}
	}
	limit := &gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger"}, Spec: gatewayv1alpha1.RateLimitSpec{
		TargetRef: gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: "ledger"},
		Local:     bucket(100), Descriptors: []gatewayv1alpha1.Descriptor{{Path: "/admin", Bucket: bucket(10)}},
	}, Status: gatewayv1alpha1.RateLimitStatus{Conditions: []metav1.Condition{{Type: gatewayv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: gatewayv1alpha1.ReasonEnforced}}}}
	// The default gateway's HTTP server, and team-a's ledger in HTTPRoute
	// mode on the Gateway API Gateway istio-system/web, accepted by istiod.
	defaultGateway := &networkingv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "portico-gateway"}, Spec: networkingv1alpha3.Gateway{
		Servers: []*networkingv1alpha3.Server{{Port: &networkingv1alpha3.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"}}}}}
	webLedger := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ledger-web", UID: "uid-ledger-web"},
		Spec: gatewayv1alpha1.APIRuleSpec{Hosts: []gatewayv1alpha1.Hostname{"web.a.example"}, Rules: []gatewayv1alpha1.Rule{{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}}}}}
	b := fake.NewClientBuilder().WithScheme(explain.Scheme()).WithObjects(
		ledgerVS, ledger, limit, svc("team-a", "ledger"), ap, ra, late,
		vs("team-b", "shop.b.example", "shop"), svc("team-b", "shop"),
		defaultGateway, webGateway(), webLedger, webRoute(webLedger))
	if namespaceOnly != "" {
		// RBAC of a tenant: lists in its own namespace only.
		b = b.WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if lo.Namespace != namespaceOnly {
				return apierrors.NewForbidden(schema.GroupResource{}, "", nil)
			}
			return c.List(ctx, list, opts...)
		}})
	}
	return b.Build()
}

// webGateway is the Gateway API Gateway istio-system/web: HTTP on 80 for
// routes of every namespace.
func webGateway() *gwapiv1.Gateway {
	all := gwapiv1.NamespacesFromAll
	return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "web"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "istio", Listeners: []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType,
			AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &all}}}}}}
}

// webRoute is the HTTPRoute the apirule controller writes for the APIRule
// in HTTPRoute mode, as istiod accepted it.
func webRoute(r *gatewayv1alpha1.APIRule) *gwapiv1.HTTPRoute {
	ref := gwapiv1.ParentReference{Group: ptr.To(gwapiv1.Group(gwapiv1.GroupName)), Kind: ptr.To(gwapiv1.Kind("Gateway")),
		Namespace: ptr.To(gwapiv1.Namespace("istio-system")), Name: "web"}
	exact, path := gwapiv1.PathMatchExact, "/health"
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, Generation: 1,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "APIRule", Name: r.Name, UID: r.UID, Controller: ptr.To(true)}}},
		Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{ref}},
			Hostnames: []gwapiv1.Hostname{"web.a.example"},
			Rules: []gwapiv1.HTTPRouteRule{{Name: ptr.To(gwapiv1.SectionName(gatewayv1alpha1.HTTPRouteRuleName(r.Namespace, r.Name, r.Spec.Rules[0]))),
				Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &exact, Value: &path}, Method: ptr.To(gwapiv1.HTTPMethod("GET"))}},
				BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
					Name: "ledger", Port: ptr.To(gwapiv1.PortNumber(8080))}, Weight: ptr.To[int32](1)}}}}}},
		Status: gwapiv1.HTTPRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: []gwapiv1.RouteParentStatus{{ParentRef: ref, ControllerName: "istio.io/gateway-controller",
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "Route was valid", ObservedGeneration: 1}}}}}},
	}
	return route
}

func jwt(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	return "e30." + base64.RawURLEncoding.EncodeToString(payload) + ".sig"
}

func TestExplainCommand(t *testing.T) {
	cases := []struct {
		name, as, host, path, token string
		port                        uint
		parent                      string
		want                        explain.Outcome
		says                        []string
	}{
		{"the administrator sees the default gateway's server", "", "ledger.a.example", "/health", "", 0, "", explain.OutcomeRouted,
			[]string{"server http of Gateway istio-system/portico-gateway: port 80, HTTP, hosts *"}},
		{"a port no server takes", "", "ledger.a.example", "/health", "", 8080, "", explain.OutcomeRefused,
			[]string{"no server of Gateway istio-system/portico-gateway takes http on port 8080"}},
		{"HTTPRoute mode: the rule of the APIRule behind the HTTPRoute", "", "web.a.example", "/health", "", 0, "istio-system/web", explain.OutcomeRouted,
			[]string{"listener http of Gateway istio-system/web", "HTTPRoute team-a/ledger-web", "rule 0 (path /health, methods GET) of APIRule team-a/ledger-web",
				"accepted: Accepted: Route was valid (istio.io/gateway-controller)"}},
		{"HTTPRoute mode as team-a, who may not read the Gateway", "team-a", "web.a.example", "/health", "", 0, "istio-system/web", explain.OutcomeRouted,
			[]string{"Gateway istio-system/web (Gateway API) is not visible to you", "HTTPRoute team-a/ledger-web"}},
		{"the administrator sees team-b's route", "", "shop.b.example", "/", "", 0, "", explain.OutcomeRouted, []string{"VirtualService team-b/shop"}},
		{"a tenant is told the host is another namespace's, never whose", "team-a", "shop.b.example", "/", "", 0, "", explain.Outcome404,
			[]string{"a host owned by another namespace", "not visible to you"}},
		{"an open path", "team-a", "ledger.a.example", "/health", "", 0, "", explain.OutcomeRouted, []string{"VirtualService team-a/ledger", "Service team-a/ledger",
			"rule 0 (path /*, every method) of APIRule team-a/ledger", "RateLimit team-a/ledger counts it in the route's own limits: local bucket (100 tokens, 100 per 1m0s) per gateway pod\""}},
		{"a path with a bucket of its own", "team-a", "ledger.a.example", "/admin/users", "", 0, "", explain.Outcome403, []string{"descriptor 0's local bucket (10 tokens"}},
		{"a protected path without token", "team-a", "ledger.a.example", "/admin", "", 0, "", explain.Outcome403, nil},
		{"a protected path with the issuer's token", "team-a", "ledger.a.example", "/admin", jwt(map[string]any{"iss": "https://idp.a", "sub": "alice"}),
			0, "", explain.OutcomeRouted, []string{"signature NOT checked", "https://idp.a/jwks"}},
		{"a token of an issuer nobody trusts", "team-a", "ledger.a.example", "/admin", jwt(map[string]any{"iss": "https://evil"}),
			0, "", explain.Outcome401, []string{"no RequestAuthentication you may read trusts issuer https://evil"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			o := options{host: c.host, path: c.path, method: "GET", token: c.token, gateway: gateway, namespace: c.as, output: "json", port: c.port, parent: c.parent}
			if o.namespace == "" {
				o.namespace = "default"
			}
			var out bytes.Buffer
			g.Expect(run(context.Background(), cluster(c.as), o, &out)).To(Succeed())
			var e explain.Explanation
			g.Expect(json.Unmarshal(out.Bytes(), &e)).To(Succeed())
			g.Expect(e.Outcome).To(Equal(c.want), out.String())
			for _, s := range c.says {
				g.Expect(out.String()).To(ContainSubstring(s))
			}
			if c.as == "team-a" {
				g.Expect(out.String()).NotTo(ContainSubstring("team-b"), "a tenant never sees another tenant's objects")
			}
			o.output = "text"
			out.Reset()
			g.Expect(run(context.Background(), cluster(c.as), o, &out)).To(Succeed())
			g.Expect(out.String()).To(ContainSubstring("verdict: " + string(c.want)))
		})
	}
}
