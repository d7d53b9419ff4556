package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

var (
	env       *testenv.Env
	k8sClient client.Client
)

const ns = "validation"

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		AddToScheme: []func(*runtime.Scheme) error{gatewayv1alpha1.AddToScheme},
		Namespaces:  []string{ns},
		Setup: func(_ context.Context, e *testenv.Env) error {
			env, k8sClient = e, e.Client
			return nil
		},
	}))
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

// severalIssuers is a jwt in the list form: two issuers, one read from a
// header and a query parameter, and two authorization alternatives.
func severalIssuers() *gatewayv1alpha1.JWTAuthentication {
	return &gatewayv1alpha1.JWTAuthentication{
		Authentications: []gatewayv1alpha1.JWTIssuer{
			{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"},
			{Issuer: "https://partners.example.com", JWKSURI: "https://partners.example.com/keys",
				FromHeaders: []gatewayv1alpha1.JWTHeader{{Name: "x-partner-token", Prefix: "Token "}}, FromParams: []string{"partner_token"}},
		},
		Authorizations: []gatewayv1alpha1.JWTAuthorization{
			{RequiredScopes: []string{"orders.read"}, Audiences: []string{"orders"}},
			{RequiredScopes: []string{"admin"}},
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
			wantErr: "each rule needs exactly one of noAuth: true, jwt or extAuth",
		},
		"neither noAuth nor jwt": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].NoAuth = nil },
			wantErr: "each rule needs exactly one of noAuth: true, jwt or extAuth",
		},
		"noAuth false without jwt": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].NoAuth = ptr.To(false) },
			wantErr: "each rule needs exactly one of noAuth: true, jwt or extAuth",
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
		"templates as whole segments": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules[0].Path = "/status/{*}/items/{**}"
		}},
		"a rest template alone": {mutate: func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/{**}" }},
		"a template inside a segment": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/orders/{*}.json" },
			wantErr: "'{*}' and '{**}' as whole segments",
		},
		"a rest template that is not last": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/files/{**}/meta" },
			wantErr: "'{**}' only as the last",
		},
		"two rest templates": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/{**}/{**}" },
			wantErr: "'{**}' only as the last",
		},
		"an unknown template": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/orders/{id}" },
			wantErr: "'{*}' and '{**}' as whole segments",
		},
		"a template ending with '/*'": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[0].Path = "/orders/{*}/*" },
			wantErr: "a template path may not end with '/*'",
		},
		"a prefix rule over a template with other authentication": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules,
					gatewayv1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)},
					gatewayv1alpha1.Rule{Path: "/api/{*}/keys", JWT: &gatewayv1alpha1.JWTAuthentication{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"}})
			},
			wantErr: "a prefix rule covers another rule's path",
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
		"no gateway: the default gateway": {
			mutate: func(r *gatewayv1alpha1.APIRule) { r.Spec.Gateway = "" },
		},
		"a Gateway API Gateway (HTTPRoute mode), defaults filled in": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Name: "edge", SectionName: "https"}
			},
		},
		"both an Istio Gateway and a Gateway API Gateway": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.ParentRef = &gatewayv1alpha1.ParentReference{Name: "edge"} },
			wantErr: "set gateway (an Istio Gateway) or parentRef (a Gateway API Gateway), not both",
		},
		"a parentRef of another kind": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Kind: "Service", Name: "edge"}
			},
			wantErr: `Unsupported value: "Service"`,
		},
		"a parentRef without a name": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{}
			},
			wantErr: "spec.parentRef.name",
		},
		"more rules in HTTPRoute mode than an HTTPRoute holds": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Name: "edge"}
				r.Spec.Rules = nil
				for i := range 17 {
					r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: fmt.Sprintf("/p%d", i), NoAuth: ptr.To(true)})
				}
			},
			wantErr: "an APIRule with parentRef has at most 16 rules",
		},
		"gateway without namespace": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Gateway = "public" },
			wantErr: "gateway must be <namespace>/<name> of an Istio Gateway",
		},
		"jwks over http": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].JWT.JWKSURI = "http://idp.example.com/jwks.json" },
			wantErr: "jwksUri must be an https URL",
		},
		"several issuers with token locations and alternatives": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules[1].JWT = severalIssuers()
		}},
		"both the single-issuer form and authentications": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[1].JWT.Authentications = severalIssuers().Authentications
			},
			wantErr: "jwt needs either issuer and jwksUri (one issuer) or authentications (a list of issuers), not both",
		},
		"neither issuer nor authentications": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].JWT = &gatewayv1alpha1.JWTAuthentication{} },
			wantErr: "jwt needs either issuer and jwksUri",
		},
		"issuer without jwksUri": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].JWT.JWKSURI = "" },
			wantErr: "issuer and jwksUri go together",
		},
		"authentications with flat audiences": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Audiences = []string{"orders"}
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "with authentications, put audiences and requiredScopes under authorizations",
		},
		"authorizations with a single issuer": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[1].JWT.Authorizations = severalIssuers().Authorizations
			},
			wantErr: "authorizations go with authentications",
		},
		"an empty authorization": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authorizations = append(j.Authorizations, gatewayv1alpha1.JWTAuthorization{})
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "an authorization needs requiredScopes or audiences",
		},
		"an issuer listed twice": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authentications = append(j.Authentications, j.Authentications[0])
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "Duplicate value",
		},
		"five issuers": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				for i := range 3 {
					j.Authentications = append(j.Authentications, gatewayv1alpha1.JWTIssuer{Issuer: fmt.Sprintf("https://idp%d.example.com", i), JWKSURI: "https://idp.example.com/jwks.json"})
				}
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "must have at most 4 items",
		},
		"a list issuer's jwks over http": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authentications[0].JWKSURI = "http://idp.example.com/jwks.json"
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "jwksUri must be an https URL",
		},
		"a header name that is no HTTP token": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authentications[0].FromHeaders = []gatewayv1alpha1.JWTHeader{{Name: ":authority"}}
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "fromHeaders[0].name: Invalid value",
		},
		"a header prefix with a line break": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authentications[0].FromHeaders = []gatewayv1alpha1.JWTHeader{{Name: "x-token", Prefix: "Bearer\n"}}
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "fromHeaders[0].prefix: Invalid value",
		},
		"a query parameter with a space": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authentications[0].FromParams = []string{"access token"}
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "fromParams[0]: Invalid value",
		},
		"more than 4 token places for one issuer": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				j := severalIssuers()
				j.Authentications[0].FromHeaders = []gatewayv1alpha1.JWTHeader{{Name: "a"}, {Name: "b"}, {Name: "c"}}
				j.Authentications[0].FromParams = []string{"d", "e"}
				r.Spec.Rules[1].JWT = j
			},
			wantErr: "an issuer reads its tokens from at most 4 places",
		},
		"a list-form prefix over a single-issuer path is left to the controller": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules[1].JWT = severalIssuers()
			r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/42", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, JWT: &gatewayv1alpha1.JWTAuthentication{
				Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json",
			}})
		}},
		"no service anywhere": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Service = nil },
			wantErr: "set spec.service, or a service or backends on every rule",
		},
		"service port out of range": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Service.Port = 70000 },
			wantErr: "spec.service.port: Invalid value: 70000",
		},
		"no rules": {
			mutate:  func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules = nil },
			wantErr: "spec.rules: Required value",
		},
		"name longer than a label value": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.GenerateName = ""
				r.Name = strings.Repeat("a", 64)
			},
			wantErr: "an APIRule name has at most 63 characters",
		},
		"name of 63 characters": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.GenerateName = ""
			r.Name = strings.Repeat("b", 63)
		}},
		"noAuth prefix covers a JWT path": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/*", NoAuth: ptr.To(true)})
			},
			wantErr: "a prefix rule covers another rule's path",
		},
		"JWT prefix covers a noAuth path": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/status", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)})
			},
			wantErr: "a prefix rule covers another rule's path",
		},
		"nested prefix with more scopes": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				admin := *r.Spec.Rules[1].JWT
				admin.RequiredScopes = []string{"admin"}
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/admin/*", JWT: &admin})
			},
			wantErr: "a prefix rule covers another rule's path",
		},
		"covered path with another issuer": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				other := *r.Spec.Rules[1].JWT
				other.Issuer = "https://other.example.com"
				r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/42", JWT: &other})
			},
			wantErr: "a prefix rule covers another rule's path",
		},
		"covered path with the same authentication": {mutate: func(r *gatewayv1alpha1.APIRule) {
			same := *r.Spec.Rules[1].JWT
			same.Audiences = []string{"orders"}
			r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/42", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, JWT: &same})
		}},
		"covered path with other methods": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/status", Methods: []gatewayv1alpha1.HTTPMethod{"HEAD"}, NoAuth: ptr.To(true)})
		}},
		"prefix does not cover its own parent path": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders", NoAuth: ptr.To(true)})
		}},
		"covered path on another service is left to the controller": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{Path: "/orders/public", NoAuth: ptr.To(true),
				Service: &gatewayv1alpha1.ServiceReference{Name: "public", Port: 80}})
		}},
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
			Local:     &gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}},
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
		"an APIRule of group gateway.portico.dev": {mutate: func(r *gatewayv1alpha1.RateLimit) { r.Spec.TargetRef.Group = gatewayv1alpha1.PorticoGatewayGroup }},
		"an Istio Gateway of group networking.istio.io": {mutate: func(r *gatewayv1alpha1.RateLimit) {
			r.Spec.TargetRef = gatewayv1alpha1.TargetReference{Group: gatewayv1alpha1.IstioNetworkingGroup, Kind: gatewayv1alpha1.TargetGateway, Name: "public"}
		}},
		"a Gateway API Gateway": {mutate: func(r *gatewayv1alpha1.RateLimit) {
			r.Spec.TargetRef = gatewayv1alpha1.TargetReference{Group: gatewayv1alpha1.GatewayAPIGroup, Kind: gatewayv1alpha1.TargetGateway, Name: strings.Repeat("g", 63)}
		}},
		"an APIRule of the Gateway API's group": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.TargetRef.Group = gatewayv1alpha1.GatewayAPIGroup },
			wantErr: "group does not match kind",
		},
		"a Gateway of Portico's group": {
			mutate: func(r *gatewayv1alpha1.RateLimit) {
				r.Spec.TargetRef = gatewayv1alpha1.TargetReference{Group: gatewayv1alpha1.PorticoGatewayGroup, Kind: gatewayv1alpha1.TargetGateway, Name: "public"}
			},
			wantErr: "group does not match kind",
		},
		"an unknown group": {
			mutate:  func(r *gatewayv1alpha1.RateLimit) { r.Spec.TargetRef.Group = "apps" },
			wantErr: `Unsupported value: "apps"`,
		},
		"a Gateway API Gateway name too long for a label": {
			mutate: func(r *gatewayv1alpha1.RateLimit) {
				r.Spec.TargetRef = gatewayv1alpha1.TargetReference{Group: gatewayv1alpha1.GatewayAPIGroup, Kind: gatewayv1alpha1.TargetGateway, Name: strings.Repeat("g", 64)}
			},
			wantErr: "a Gateway API Gateway's name has at most 63 characters",
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
	for name, tc := range rateLimitBounds() {
		tests[name] = tc
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

// rateLimitBounds are the cases on both sides of every bound on the size
// of a RateLimit: each descriptor is rendered into the EnvoyFilter once per
// route of the APIRule, so the bounds keep one RateLimit under the
// controller's EnvoyFilter size budget.
func rateLimitBounds() map[string]struct {
	mutate  func(r *gatewayv1alpha1.RateLimit)
	wantErr string
} {
	// path is a descriptor path of n characters.
	path := func(n int) string { return "/" + strings.Repeat("p", n-1) }
	header := func(name string, value int) *gatewayv1alpha1.HeaderMatch {
		return &gatewayv1alpha1.HeaderMatch{Name: name, Value: strings.Repeat("v", value)}
	}
	descriptors := func(ds ...gatewayv1alpha1.Descriptor) func(r *gatewayv1alpha1.RateLimit) {
		return func(r *gatewayv1alpha1.RateLimit) { r.Spec.Descriptors = ds }
	}
	// many is n descriptors of 32 characters each (path and header): 16 of
	// them fill the 512 characters exactly.
	many := func(n int) func(r *gatewayv1alpha1.RateLimit) {
		var ds []gatewayv1alpha1.Descriptor
		for i := range n {
			ds = append(ds, gatewayv1alpha1.Descriptor{Path: fmt.Sprintf("/%015d", i), Header: header("x-plan", 10)})
		}
		return descriptors(ds...)
	}
	const total = "the descriptors' paths, header names and header values may hold at most 512 characters together"
	return map[string]struct {
		mutate  func(r *gatewayv1alpha1.RateLimit)
		wantErr string
	}{
		"16 descriptors of 512 characters": {mutate: many(16)},
		"17 descriptors":                   {mutate: many(17), wantErr: "spec.descriptors: Too many: 17: must have at most 16 items"},
		"header value of 256 characters":   {mutate: descriptors(gatewayv1alpha1.Descriptor{Header: header("x", 256)})},
		"header value of 257 characters": {
			mutate:  descriptors(gatewayv1alpha1.Descriptor{Header: header("x", 257)}),
			wantErr: "spec.descriptors[0].header.value: Too long: may not be more than 256",
		},
		"path of 256 characters": {mutate: descriptors(gatewayv1alpha1.Descriptor{Path: path(256)})},
		"path of 257 characters": {
			mutate:  descriptors(gatewayv1alpha1.Descriptor{Path: path(257)}),
			wantErr: "spec.descriptors[0].path: Too long: may not be more than 256",
		},
		"512 characters in total": {
			mutate: descriptors(gatewayv1alpha1.Descriptor{Path: path(256)}, gatewayv1alpha1.Descriptor{Path: path(128), Header: header(strings.Repeat("h", 64), 64)}),
		},
		"513 characters in total": {
			mutate:  descriptors(gatewayv1alpha1.Descriptor{Path: path(256)}, gatewayv1alpha1.Descriptor{Path: path(128), Header: header(strings.Repeat("h", 64), 65)}),
			wantErr: total,
		},
		"513 characters in headers only": {
			mutate:  descriptors(gatewayv1alpha1.Descriptor{Header: header("x", 256)}, gatewayv1alpha1.Descriptor{Header: header("y", 255)}),
			wantErr: total,
		},
	}
}

// unstructuredOf converts a typed object so tests can put into it what the
// Go types cannot hold (durations such as "10 seconds", floats for ints).
func unstructuredOf(g Gomega, obj runtime.Object, kind string) *unstructured.Unstructured {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gatewayv1alpha1.GroupVersion.WithKind(kind))
	return u
}

// setField sets a value at a path of string keys and list indexes.
func setField(obj map[string]any, value any, path ...any) {
	var cur any = obj
	for i, step := range path {
		last := i == len(path)-1
		switch key := step.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				m[key] = value
				return
			}
			if _, ok := m[key]; !ok {
				m[key] = map[string]any{}
			}
			cur = m[key]
		case int:
			l := cur.([]any)
			if last {
				l[key] = value
				return
			}
			cur = l[key]
		}
	}
}

func TestAPIRuleDurations(t *testing.T) {
	const (
		timeoutErr = "timeout must be a duration from 1ms to 1h in whole milliseconds"
		maxAgeErr  = "maxAge must be a whole number of seconds from 1s to 24h"
	)
	fields := map[string][]any{
		"spec.timeout":          {"spec", "timeout"},
		"spec.rules[0].timeout": {"spec", "rules", 0, "timeout"},
	}
	type value struct {
		value   string
		wantErr string // "" accepts
	}
	timeouts := []value{
		{"10 seconds", timeoutErr}, {"0s", timeoutErr}, {"-1s", timeoutErr}, {"1ns", timeoutErr},
		{"1.5ms", timeoutErr}, {"500us", timeoutErr}, {"1µs", timeoutErr}, {"+5s", timeoutErr},
		{"1.0001s", timeoutErr}, {"2h", timeoutErr}, {"1h0m0.001s", timeoutErr}, {"5", timeoutErr},
		{"", timeoutErr}, {" 5s", timeoutErr}, {"1d", timeoutErr},
		{"1ms", ""}, {"1.5s", ""}, {"1m30s", ""}, {"0.5h", ""}, {"1h", ""}, {"59m59.999s", ""},
	}
	maxAges := []value{
		{"10 minutes", maxAgeErr}, {"0s", maxAgeErr}, {"-1s", maxAgeErr}, {"1ns", maxAgeErr},
		{"500ms", maxAgeErr}, {"1.5s", maxAgeErr}, {"25h", maxAgeErr}, {"+10s", maxAgeErr},
		{"1s", ""}, {"600s", ""}, {"10m", ""}, {"1.5m", ""}, {"24h", ""},
	}
	type testCase struct {
		path    []any
		value   string
		wantErr string
	}
	tests := map[string]testCase{}
	for field, path := range fields {
		for _, v := range timeouts {
			tests[field+"="+v.value] = testCase{path: path, value: v.value, wantErr: v.wantErr}
		}
	}
	for _, v := range maxAges {
		tests["spec.cors.maxAge="+v.value] = testCase{path: []any{"spec", "cors", "maxAge"}, value: v.value, wantErr: v.wantErr}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			u := unstructuredOf(g, validRule(), "APIRule")
			setField(u.Object, tc.value, tc.path...)
			err := k8sClient.Create(context.Background(), u)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				typed := &gatewayv1alpha1.APIRule{}
				g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(u), typed)).To(Succeed())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
	t.Run("an overflowing duration is rejected too", func(t *testing.T) {
		g := NewWithT(t)
		u := unstructuredOf(g, validRule(), "APIRule")
		setField(u.Object, "99999999999h", "spec", "timeout")
		g.Expect(k8sClient.Create(context.Background(), u)).To(MatchError(ContainSubstring("spec.timeout")))
	})
}

// TestNoAdmittedObjectBreaksTheTypedCache creates odd objects the way kubectl
// would (untyped JSON). The controllers read APIRules and RateLimits through
// typed informers: a single stored object that does not decode into the Go
// types fails every List, stopping both controllers for the whole cluster.
// So whatever the API server admits must decode.
func TestNoAdmittedObjectBreaksTheTypedCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const cacheNS = "typed-cache"
	g.Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cacheNS}})).To(Succeed())

	type edit struct {
		path  []any
		value any
	}
	at := func(value any, path ...any) edit { return edit{path: path, value: value} }
	durations := []string{
		"10 seconds", "1.5h", "+5s", "-5s", "1h0m0.001s", "0s", "0", "1ns", "1µs", "1us", ".5s", "5.s", "1e3s", "5",
		"", " 5s", "5s ", "P1D", "9223372036854775807ns", "9223372036854775808ns", "99999999999h", "1m1m", "1h-1m",
	}
	numbers := []any{
		int64(65535), int64(65536), int64(0), int64(-1), int64(2147483648), int64(9223372036854775807),
		1.5, json.Number("8080.0"), json.Number("8.08e3"), json.Number("1e400"), "8080", true,
	}
	texts := []any{"café", "日本語", "\u0000", "a\u202eb", strings.Repeat("x", 300), "%00", int64(1), map[string]any{}, nil}

	var apiRuleEdits, rateLimitEdits []edit
	for _, d := range durations {
		apiRuleEdits = append(apiRuleEdits, at(d, "spec", "timeout"), at(d, "spec", "rules", 1, "timeout"), at(d, "spec", "cors", "maxAge"))
		rateLimitEdits = append(rateLimitEdits, at(d, "spec", "local", "fillInterval"))
	}
	apiRuleEdits = append(apiRuleEdits, at(json.Number("15"), "spec", "timeout"), at(true, "spec", "rules", 0, "noAuth"))
	for _, n := range numbers {
		apiRuleEdits = append(apiRuleEdits, at(n, "spec", "service", "port"), at(n, "spec", "rules", 0, "noAuth"))
		rateLimitEdits = append(rateLimitEdits, at(n, "spec", "local", "maxTokens"), at(n, "spec", "local", "tokensPerFill"), at(n, "spec", "enforce"))
	}
	for _, s := range texts {
		apiRuleEdits = append(apiRuleEdits,
			at([]any{s}, "spec", "hosts"), at(s, "spec", "gateway"), at(s, "spec", "rules", 0, "path"),
			at(s, "spec", "rules", 1, "jwt", "issuer"), at([]any{s}, "spec", "rules", 1, "jwt", "audiences"),
			at([]any{s}, "spec", "cors", "allowOrigins"), at(s, "spec", "service", "name"), at(s, "spec", "service", "namespace"))
		rateLimitEdits = append(rateLimitEdits, at(s, "spec", "targetRef", "name"), at(s, "spec", "targetRef", "kind"))
		// The jwt list form, with the odd value in one place at a time.
		listForm := func(issuer, prefix, param, audience any) map[string]any {
			return map[string]any{
				"authentications": []any{map[string]any{"issuer": issuer, "jwksUri": "https://idp.example.com/keys",
					"fromHeaders": []any{map[string]any{"name": "x-token", "prefix": prefix}}, "fromParams": []any{param}}},
				"authorizations": []any{map[string]any{"audiences": []any{audience}}},
			}
		}
		apiRuleEdits = append(apiRuleEdits,
			at(listForm(s, "Bearer ", "token", "orders"), "spec", "rules", 1, "jwt"),
			at(listForm("https://idp.example.com", s, "token", "orders"), "spec", "rules", 1, "jwt"),
			at(listForm("https://idp.example.com", "Bearer ", s, "orders"), "spec", "rules", 1, "jwt"),
			at(listForm("https://idp.example.com", "Bearer ", "token", s), "spec", "rules", 1, "jwt"))
	}
	apiRuleEdits = append(apiRuleEdits,
		at(map[string]any{"name": "x", "port": int64(1), "extra": "pruned"}, "spec", "rules", 0, "service"),
		at([]any{"GET", "GET"}, "spec", "rules", 0, "methods"),
		at("unknown", "spec", "extra"),
	)

	create := func(obj runtime.Object, kind string, edits []edit) (accepted, rejected int) {
		for i, e := range edits {
			u := unstructuredOf(g, obj, kind)
			u.SetGenerateName("")
			u.SetName(fmt.Sprintf("%s-%d", strings.ToLower(kind), i))
			u.SetNamespace(cacheNS)
			setField(u.Object, e.value, e.path...)
			if err := k8sClient.Create(ctx, u); err != nil {
				rejected++
				continue
			}
			accepted++
			// Name the culprit when the List below fails.
			typed, err := k8sClient.Scheme().New(u.GroupVersionKind())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), typed.(client.Object))).To(Succeed(),
				"%s with %v = %#v was admitted but does not decode", kind, e.path, e.value)
		}
		return accepted, rejected
	}

	accepted, rejected := create(validRule(), "APIRule", apiRuleEdits)
	g.Expect(accepted).To(BeNumerically(">", 10), "the table has admissible cases")
	g.Expect(rejected).To(BeNumerically(">", 10), "the table has inadmissible cases")
	rules := &gatewayv1alpha1.APIRuleList{}
	g.Expect(k8sClient.List(ctx, rules, client.InNamespace(cacheNS))).To(Succeed())
	g.Expect(rules.Items).To(HaveLen(accepted))

	accepted, rejected = create(validLimit(), "RateLimit", rateLimitEdits)
	g.Expect(accepted).To(BeNumerically(">", 3))
	g.Expect(rejected).To(BeNumerically(">", 3))
	limits := &gatewayv1alpha1.RateLimitList{}
	g.Expect(k8sClient.List(ctx, limits, client.InNamespace(cacheNS))).To(Succeed())
	g.Expect(limits.Items).To(HaveLen(accepted))
}
