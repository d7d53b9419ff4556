package v1alpha1_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/hack/testenv"
)

var k8sClient client.Client

const ns = "validation"

func TestMain(m *testing.M) {
	env, err := testenv.Environment()
	if err != nil {
		panic(err)
	}
	cfg, err := env.Start()
	if err != nil {
		panic(err)
	}
	s := runtime.NewScheme()
	_ = gatewayv1alpha1.AddToScheme(s)
	_ = corev1.AddToScheme(s)
	k8sClient, err = client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		panic(err)
	}
	if err := k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func validRule() *gatewayv1alpha1.APIRule {
	return &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "orders-", Namespace: ns},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:   []gatewayv1alpha1.Hostname{"orders.example.com"},
			Gateway: "istio-system/public",
			Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules: []gatewayv1alpha1.Rule{
				{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
				{Path: "/orders/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET", "POST"}, JWT: &gatewayv1alpha1.JWTAuthentication{
					Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json", Audiences: []string{"orders"},
				}},
			},
		},
	}
}

func TestAPIRuleValidation(t *testing.T) {
	tests := map[string]struct {
		mutate  func(r *gatewayv1alpha1.APIRule)
		wantErr string
	}{
		"valid": {mutate: func(*gatewayv1alpha1.APIRule) {}},
		"wildcard host": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Hosts = []gatewayv1alpha1.Hostname{"*.example.com"}
		}},
		"both noAuth and jwt": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].NoAuth = ptr.To(true) },
			wantErr: "each rule needs exactly one of noAuth: true or jwt",
		},
		"neither noAuth nor jwt": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].NoAuth = nil },
			wantErr: "each rule needs exactly one of noAuth: true or jwt",
		},
		"noAuth false without jwt": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].NoAuth = ptr.To(false) },
			wantErr: "each rule needs exactly one of noAuth: true or jwt",
		},
		"bad host": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Hosts = []gatewayv1alpha1.Hostname{"Orders_API"} },
			wantErr: "must be a lower-case DNS name such as api.example.com",
		},
		"path without slash": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "health" },
			wantErr: "path must start with '/'",
		},
		"wildcard in the middle": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/a*/b" },
			wantErr: "a wildcard path must end with '/*'",
		},
		"unknown method": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Methods = []gatewayv1alpha1.HTTPMethod{"FETCH"} },
			wantErr: `Unsupported value: "FETCH"`,
		},
		"duplicate path and method": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET", "HEAD"}, NoAuth: ptr.To(true)})
			},
			wantErr: "two rules have the same path and a method in common",
		},
		"same path, all methods overlaps": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)})
			},
			wantErr: "two rules have the same path and a method in common",
		},
		"same path, other methods is fine": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"POST"}, NoAuth: ptr.To(true)})
			},
		},
		"gateway without namespace": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Gateway = "public" },
			wantErr: "gateway must be <namespace>/<name> of an Istio Gateway",
		},
		"jwks over http": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].JWT.JWKSURI = "http://idp.example.com/jwks.json" },
			wantErr: "jwksUri must be an https URL",
		},
		"no service anywhere": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Service = nil },
			wantErr: "set spec.service, or a service on every rule",
		},
		"service port out of range": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Service.Port = 70000 },
			wantErr: "spec.service.port: Invalid value: 70000",
		},
		"no rules": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules = nil },
			wantErr: "spec.rules: Required value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := validRule()
			tc.mutate(r)
			err := k8sClient.Create(context.Background(), r)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func validLimit() *gatewayv1alpha1.RateLimit {
	return &gatewayv1alpha1.RateLimit{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "limit-", Namespace: ns},
		Spec: gatewayv1alpha1.RateLimitSpec{
			TargetRef: gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: "orders"},
			Local:     gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}},
		},
	}
}

func TestRateLimitValidation(t *testing.T) {
	tests := map[string]struct {
		mutate  func(r *gatewayv1alpha1.RateLimit)
		wantErr string
	}{
		"valid": {mutate: func(*gatewayv1alpha1.RateLimit) {}},
		"zero tokens": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.Local.MaxTokens = 0 },
			wantErr: "spec.local.maxTokens: Invalid value: 0",
		},
		"fill interval under a second": {
			mutate: func(r *gatewayv1alpha1.RateLimit) {
				r.Spec.Local.FillInterval = metav1.Duration{Duration: 500 * time.Millisecond}
			},
			wantErr: "fillInterval must be at least 1s",
		},
		"fill above capacity": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.Local.TokensPerFill = 1000 },
			wantErr: "tokensPerFill must not exceed maxTokens",
		},
		"unknown target kind": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.TargetRef.Kind = "Service" },
			wantErr: `Unsupported value: "Service"`,
		},
		"empty descriptor": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.Descriptors = []gatewayv1alpha1.Descriptor{{}} },
			wantErr: "a descriptor needs a path, a header or both",
		},
		"descriptor path without slash": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.Descriptors = []gatewayv1alpha1.Descriptor{{Path: "api"}} },
			wantErr: "path must start with '/'",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := validLimit()
			tc.mutate(r)
			err := k8sClient.Create(context.Background(), r)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(r.Spec.Enforce).To(HaveValue(BeTrue()), "enforce defaults to true")
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
