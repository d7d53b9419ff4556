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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
	b := fake.NewClientBuilder().WithScheme(explain.Scheme()).WithObjects(
		ledgerVS, ledger, limit, svc("team-a", "ledger"), ap, ra, late,
		vs("team-b", "shop.b.example", "shop"), svc("team-b", "shop"))
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

func jwt(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	return "e30." + base64.RawURLEncoding.EncodeToString(payload) + ".sig"
}

func TestExplainCommand(t *testing.T) {
	cases := []struct {
		name, as, host, path, token string
		want                        explain.Outcome
		says                        []string
	}{
		{"the administrator sees team-b's route", "", "shop.b.example", "/", "", explain.OutcomeRouted, []string{"VirtualService team-b/shop"}},
		{"a tenant is told the host is another namespace's, never whose", "team-a", "shop.b.example", "/", "", explain.Outcome404,
			[]string{"a host owned by another namespace", "not visible to you"}},
		{"an open path", "team-a", "ledger.a.example", "/health", "", explain.OutcomeRouted, []string{"VirtualService team-a/ledger", "Service team-a/ledger",
			"rule 0 (path /*, every method) of APIRule team-a/ledger", "RateLimit team-a/ledger counts it in the route's own limits: local bucket (100 tokens, 100 per 1m0s) per gateway pod\""}},
		{"a path with a bucket of its own", "team-a", "ledger.a.example", "/admin/users", "", explain.Outcome403, []string{"descriptor 0's local bucket (10 tokens"}},
		{"a protected path without token", "team-a", "ledger.a.example", "/admin", "", explain.Outcome403, nil},
		{"a protected path with the issuer's token", "team-a", "ledger.a.example", "/admin", jwt(map[string]any{"iss": "https://idp.a", "sub": "alice"}),
			explain.OutcomeRouted, []string{"signature NOT checked", "https://idp.a/jwks"}},
		{"a token of an issuer nobody trusts", "team-a", "ledger.a.example", "/admin", jwt(map[string]any{"iss": "https://evil"}),
			explain.Outcome401, []string{"no RequestAuthentication you may read trusts issuer https://evil"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			o := options{host: c.host, path: c.path, method: "GET", token: c.token, gateway: gateway, namespace: c.as, output: "json"}
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
