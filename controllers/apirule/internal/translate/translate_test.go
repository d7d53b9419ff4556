package translate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

type apiRuleOption func(*porticov1alpha1.APIRule)

func newAPIRule(opts ...apiRuleOption) *porticov1alpha1.APIRule {
	r := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "uid-orders"},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts:   []porticov1alpha1.Hostname{"orders.example.com"},
			Gateway: "istio-system/public",
			Service: &porticov1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules: []porticov1alpha1.Rule{
				{Path: "/health", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
			},
		},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func withRules(rules ...porticov1alpha1.Rule) apiRuleOption {
	return func(r *porticov1alpha1.APIRule) { r.Spec.Rules = rules }
}

func jwt(issuer string, audiences, scopes []string) *porticov1alpha1.JWTAuthentication {
	return &porticov1alpha1.JWTAuthentication{Issuer: issuer, JWKSURI: issuer + "/jwks.json", Audiences: audiences, RequiredScopes: scopes}
}

// selectors are the pod selectors of the Services the tests route to:
// orders-admin selects the same pods as orders, reports and analytics'
// reports other pods.
var selectors = map[types.NamespacedName]map[string]string{
	{Namespace: "shop", Name: "orders"}:       {"app": "orders"},
	{Namespace: "shop", Name: "orders-admin"}: {"app": "orders"},
	{Namespace: "shop", Name: "reports"}:      {"app": "reports"},
	{Namespace: "analytics", Name: "reports"}: {"app": "reports"},
	{Namespace: "shop", Name: "orders-v2"}:    {"app": "orders", "version": "v2"},
}

func TestTranslateGolden(t *testing.T) {
	tests := map[string]*porticov1alpha1.APIRule{
		"noauth": newAPIRule(),
		"jwt-with-claims": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"POST", "GET"},
				JWT: jwt("https://idp.example.com", []string{"shop", "orders"}, []string{"orders.write", "orders.read"})},
			porticov1alpha1.Rule{Path: "/admin/*", JWT: jwt("https://admin-idp.example.com", nil, nil)},
		)),
		"rules-with-their-own-services": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/reports/*", Methods: []porticov1alpha1.HTTPMethod{"GET"},
				Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}, JWT: jwt("https://idp.example.com", []string{"reports"}, nil)},
			porticov1alpha1.Rule{Path: "/exports/*",
				Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}, JWT: jwt("https://idp.example.com", nil, []string{"export"})},
		)),
		"jwt-several-issuers": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"GET"}, JWT: &porticov1alpha1.JWTAuthentication{
				Authentications: []porticov1alpha1.JWTIssuer{
					{Issuer: "https://partners.example.com", JWKSURI: "https://partners.example.com/keys",
						FromHeaders: []porticov1alpha1.JWTHeader{{Name: "x-partner-token"}, {Name: "Authorization", Prefix: "Bearer "}}},
					{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"},
				},
				Authorizations: []porticov1alpha1.JWTAuthorization{
					{RequiredScopes: []string{"orders.read"}, Audiences: []string{"shop", "orders"}},
					{RequiredScopes: []string{"admin", "orders.all"}},
				},
			}},
			porticov1alpha1.Rule{Path: "/feeds/*", JWT: &porticov1alpha1.JWTAuthentication{
				Authentications: []porticov1alpha1.JWTIssuer{
					{Issuer: "https://feeds.example.com", JWKSURI: "https://feeds.example.com/jwks.json", FromParams: []string{"token"}},
				},
			}},
		)),
		"routing-cors-timeouts": newAPIRule(func(r *porticov1alpha1.APIRule) {
			r.Spec.Hosts = append(r.Spec.Hosts, "*.orders.example.com")
			r.Spec.Timeout = &metav1.Duration{Duration: 15 * time.Second}
			r.Spec.CORS = &porticov1alpha1.CORSPolicy{
				AllowOrigins: []string{"https://shop.example.com", "*"}, AllowMethods: []porticov1alpha1.HTTPMethod{"PUT", "GET"},
				AllowHeaders: []string{"Authorization"}, ExposeHeaders: []string{"X-Request-Id"},
				AllowCredentials: ptr.To(true), MaxAge: &metav1.Duration{Duration: 10 * time.Minute},
			}
			r.Spec.Rules = []porticov1alpha1.Rule{
				{Path: "/*", NoAuth: ptr.To(true)},
				{Path: "/reports/*", NoAuth: ptr.To(true), Timeout: &metav1.Duration{Duration: 2 * time.Minute},
					Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}},
				{Path: "/orders", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
			}
		}),
		"request-headers-and-cookies": newAPIRule(func(r *porticov1alpha1.APIRule) {
			r.Spec.CORS = &porticov1alpha1.CORSPolicy{AllowOrigins: []string{"https://shop.example.com"}}
			r.Spec.Rules = []porticov1alpha1.Rule{
				{Path: "/orders/*", JWT: jwt("https://idp.example.com", nil, nil), Request: &porticov1alpha1.RequestModifier{
					Headers: map[string]porticov1alpha1.RequestHeaderValue{"x-api-version": "2", "x-tenant": "shop eu-1"},
					Cookies: map[string]porticov1alpha1.CookieValue{"region": "eu", "ab": "b=1"},
				}},
				{Path: "/health", NoAuth: ptr.To(true), Request: &porticov1alpha1.RequestModifier{
					Cookies: map[string]porticov1alpha1.CookieValue{"probe": "1"},
				}},
			}
		}),
		"rewrites": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/status", NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Path: "/health"}},
			porticov1alpha1.Rule{Path: "/old/*", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Path: "/health"}},
			porticov1alpha1.Rule{Path: "/orders/*", JWT: jwt("https://idp.example.com", nil, nil), Rewrite: &porticov1alpha1.Rewrite{Prefix: "/v2/orders/"}},
			porticov1alpha1.Rule{Path: "/shop/*", Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000},
				NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Prefix: "/"}},
		)),
		"path-templates": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/orders/{*}/items", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/orders/{*}", JWT: jwt("https://idp.example.com", []string{"shop"}, nil)},
			porticov1alpha1.Rule{Path: "/files/{**}", JWT: jwt("https://idp.example.com", []string{"shop"}, nil),
				Rewrite: &porticov1alpha1.Rewrite{Path: "/archive"}},
			porticov1alpha1.Rule{Path: "/v1.0/{*}/status", NoAuth: ptr.To(true),
				Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
		)),
		// A canary of the orders API, and a split of the reports between
		// this namespace and a consenting one (routes only there).
		"weighted-backends": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"GET", "POST"}, JWT: jwt("https://idp.example.com", []string{"orders"}, nil),
				Backends: []porticov1alpha1.WeightedBackend{
					{Service: porticov1alpha1.ServiceReference{Name: "orders", Port: 8080}, Weight: 90},
					{Service: porticov1alpha1.ServiceReference{Name: "orders-v2", Port: 8080}, Weight: 10},
				}},
			porticov1alpha1.Rule{Path: "/reports/*", NoAuth: ptr.To(true), Backends: []porticov1alpha1.WeightedBackend{
				{Service: porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}, Weight: 80},
				{Service: porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}, Weight: 20},
			}},
		)),
		// Rules on one path told apart by headers and query parameters;
		// the ones with more matches are tried first.
		"header-matching": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/orders", Methods: []porticov1alpha1.HTTPMethod{"GET"}, JWT: jwt("https://idp.example.com", nil, nil)},
			porticov1alpha1.Rule{Path: "/orders", Methods: []porticov1alpha1.HTTPMethod{"GET"}, JWT: jwt("https://idp.example.com", nil, nil),
				Service: &porticov1alpha1.ServiceReference{Name: "orders-admin", Port: 8080},
				Match: &porticov1alpha1.RequestMatch{
					Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-beta", Exact: "1"}, {Name: "user-agent", Prefix: "shop-app/2."}},
				}},
			porticov1alpha1.Rule{Path: "/orders/*", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000},
				Match: &porticov1alpha1.RequestMatch{
					Headers:     []porticov1alpha1.RuleHeaderMatch{{Name: "x-tenant", Regex: "team-[a-z]+"}},
					QueryParams: []porticov1alpha1.RuleQueryParamMatch{{Name: "format", Exact: "csv"}, {Name: "v", Regex: "2|3"}},
				}},
		)),
		"extauth": newAPIRule(withRules(
			porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"POST", "GET"}, ExtAuth: extAuth("ext-authz", nil)},
			porticov1alpha1.Rule{Path: "/admin/*", ExtAuth: extAuth("ext-authz", jwt("https://idp.example.com", []string{"shop"}, []string{"admin"})),
				Rewrite: &porticov1alpha1.Rewrite{Prefix: "/v2/admin/"}},
			porticov1alpha1.Rule{Path: "/reports/*", Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000},
				ExtAuth: extAuth("opa-policies", nil)},
		)),
		// Istio mode only: see TestHTTPRouteModeRefusesRetries.
		"retries": newAPIRule(func(r *porticov1alpha1.APIRule) {
			r.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Second}
			r.Spec.Rules = []porticov1alpha1.Rule{
				{Path: "/orders/*", NoAuth: ptr.To(true), Retries: &porticov1alpha1.RetryPolicy{
					Attempts: 3, PerTryTimeout: &metav1.Duration{Duration: 2500 * time.Millisecond},
					Codes: []int32{504, 503}, RetryOn: []porticov1alpha1.RetryCondition{"reset", "connect-failure"},
				}},
				{Path: "/health", NoAuth: ptr.To(true), Retries: &porticov1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}}},
			}
		}),
	}
	for name, rule := range tests {
		checkGolden(t, name, rule)
		if name == "retries" {
			continue
		}
		// The same APIRule on a Gateway API Gateway: an HTTPRoute instead
		// of the VirtualService, the same access policies.
		onGateway := rule.DeepCopy()
		onGateway.Spec.Gateway = ""
		onGateway.Spec.ParentRef = &porticov1alpha1.ParentReference{Namespace: "infra", Name: "public", SectionName: "https"}
		checkGolden(t, name+".httproute", onGateway)
	}
}

// checkGolden compares an APIRule's translation with testdata/<name>.golden.yaml.
func checkGolden(t *testing.T, name string, rule *porticov1alpha1.APIRule) {
	t.Helper()
	{
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := Input{APIRule: rule, Selectors: selectors, Parent: Parent(rule)}
			out, err := Translate(in)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := yaml.Marshal(out)
			g.Expect(err).NotTo(HaveOccurred())
			path := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				g.Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred(), "run go test -update to create %s", path)
			g.Expect(string(got)).To(Equal(string(want)))

			again, _ := yaml.Marshal(must(Translate(in)))
			g.Expect(string(again)).To(Equal(string(got)), "translation is deterministic")
		})
	}
}

func must(o Output, err error) Output {
	if err != nil {
		panic(err)
	}
	return o
}

func TestRequestAuthenticationOnlyWithJWT(t *testing.T) {
	g := NewWithT(t)
	out, err := Translate(Input{APIRule: newAPIRule(), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Workloads).To(HaveLen(1))
	g.Expect(out.Workloads[0].RequestAuthentication).To(BeNil())

	out, err = Translate(Input{APIRule: newAPIRule(withRules(porticov1alpha1.Rule{Path: "/a", JWT: jwt("https://idp", nil, nil)})), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Workloads[0].RequestAuthentication).NotTo(BeNil())
	g.Expect(out.Workloads[0].RequestAuthentication.Spec.JwtRules).To(HaveLen(1))
}

// A rule with its own Service reaches other pods than the default Service's:
// they get their own AuthorizationPolicy and RequestAuthentication, else the
// rule's JWT would be enforced nowhere.
func TestEveryBackendGetsItsOwnAccessControl(t *testing.T) {
	g := NewWithT(t)
	reports := &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}
	remote := &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}
	out, err := Translate(Input{APIRule: newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
		porticov1alpha1.Rule{Path: "/reports/*", Service: reports, JWT: jwt("https://idp", []string{"reports"}, nil)},
		porticov1alpha1.Rule{Path: "/export", Service: remote, JWT: jwt("https://idp", nil, nil)},
	)), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Workloads).To(HaveLen(2))

	byService := map[string]Workload{}
	for _, w := range out.Workloads {
		byService[w.Service.String()] = w
	}
	own := byService["shop/reports"]
	g.Expect(own.AuthorizationPolicy.Name).To(Equal("orders-reports"))
	g.Expect(own.AuthorizationPolicy.Namespace).To(Equal("shop"))
	g.Expect(own.AuthorizationPolicy.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "reports"}))
	g.Expect(own.AuthorizationPolicy.Spec.Rules).To(HaveLen(1), "only the rules routed to reports")
	g.Expect(own.AuthorizationPolicy.Spec.Rules[0].From[0].Source.RequestPrincipals).To(Equal([]string{"https://idp/*"}))
	g.Expect(own.AuthorizationPolicy.OwnerReferences).To(HaveLen(1))
	g.Expect(own.RequestAuthentication).NotTo(BeNil())
	g.Expect(own.RequestAuthentication.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "reports"}))

	def := byService["shop/orders"]
	g.Expect(def.AuthorizationPolicy.Name).To(Equal("orders"))
	g.Expect(def.AuthorizationPolicy.Spec.Rules).To(HaveLen(1))
	g.Expect(def.RequestAuthentication).To(BeNil(), "no JWT rule is routed to orders")

	_, other := byService["analytics/reports"]
	g.Expect(other).To(BeFalse(), "consent to route grants no access rules in analytics: its own policies decide")
	g.Expect(out.VirtualService.Spec.Http).To(ContainElement(HaveField("Route", ContainElement(HaveField("Destination.Host", "reports.analytics.svc.cluster.local")))))
}

// The request principal is <iss>/<sub>, so "iss/*" alone would also admit
// tokens of an issuer named iss/<anything> that another
// RequestAuthentication on the same pods trusts.
func TestJWTRulesPinTheIssuer(t *testing.T) {
	g := NewWithT(t)
	out, err := Translate(Input{APIRule: newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/a", JWT: jwt("https://idp.example.com", nil, nil)},
	)), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	rule := out.Workloads[0].AuthorizationPolicy.Spec.Rules[0]
	g.Expect(rule.When).To(ContainElement(And(
		HaveField("Key", "request.auth.claims[iss]"), HaveField("Values", []string{"https://idp.example.com"}),
	)))
}

func TestTranslateErrors(t *testing.T) {
	admin := &porticov1alpha1.ServiceReference{Name: "orders-admin", Port: 8080}
	tests := map[string]struct {
		input   Input
		wantErr string
	}{
		"service without selector": {
			input:   Input{APIRule: newAPIRule()},
			wantErr: "service shop/orders has no pod selector",
		},
		"rule service without selector": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/a", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "external", Port: 80}},
			)), Selectors: selectors},
			wantErr: "service shop/external has no pod selector",
		},
		"one issuer, two key sets": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/a", JWT: &porticov1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://idp/one"}},
				porticov1alpha1.Rule{Path: "/b", JWT: &porticov1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://idp/two"}},
			)), Selectors: selectors},
			wantErr: "one issuer needs one key set",
		},
		"noAuth prefix covers a JWT path": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)},
				porticov1alpha1.Rule{Path: "/api/admin", JWT: jwt("https://idp", nil, nil)},
			)), Selectors: selectors},
			wantErr: "rule /api/* (noAuth) covers rule /api/admin (jwt issuer https://idp)",
		},
		"JWT prefix covers a path with more scopes": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/api/*", JWT: jwt("https://idp", nil, nil)},
				porticov1alpha1.Rule{Path: "/api/admin/*", JWT: jwt("https://idp", nil, []string{"admin"})},
			)), Selectors: selectors},
			wantErr: "rule /api/* (jwt issuer https://idp) covers rule /api/admin/* (jwt issuer https://idp, scopes admin)",
		},
		"covered rule names the default service explicitly": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)},
				porticov1alpha1.Rule{Path: "/api/admin", JWT: jwt("https://idp", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "orders", Port: 8081}},
			)), Selectors: selectors},
			wantErr: "on the pods of service shop/orders",
		},
		"covered rule on another service selecting the same pods": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)},
				porticov1alpha1.Rule{Path: "/api/admin", JWT: jwt("https://idp", nil, nil), Service: admin},
			)), Selectors: selectors},
			wantErr: "on the pods of service shop/orders-admin",
		},
		"same path twice with other authentication": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/api/*", NoAuth: ptr.To(true)},
				porticov1alpha1.Rule{Path: "/api/*", JWT: jwt("https://idp", nil, nil), Service: admin},
			)), Selectors: selectors},
			wantErr: "two rules have the path /api/* and a method in common",
		},
		"same exact path twice": {
			input: Input{APIRule: newAPIRule(withRules(
				porticov1alpha1.Rule{Path: "/health", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
				porticov1alpha1.Rule{Path: "/health", JWT: jwt("https://idp", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 80}},
			)), Selectors: selectors},
			wantErr: "two rules have the path /health and a method in common",
		},
		"wildcard inside a path": {
			input:   Input{APIRule: newAPIRule(withRules(porticov1alpha1.Rule{Path: "/a/*/b", NoAuth: ptr.To(true)})), Selectors: selectors},
			wantErr: "may only end with the wildcard",
		},
		"suffix match": {
			input:   Input{APIRule: newAPIRule(withRules(porticov1alpha1.Rule{Path: "*/admin", NoAuth: ptr.To(true)})), Selectors: selectors},
			wantErr: "must start with '/'",
		},
		"no service at all": {
			input:   Input{APIRule: newAPIRule(func(r *porticov1alpha1.APIRule) { r.Spec.Service = nil }), Selectors: selectors},
			wantErr: "a rule names no service",
		},
		"no gateway at all": {
			input:   Input{APIRule: newAPIRule(func(r *porticov1alpha1.APIRule) { r.Spec.Gateway = "" }), Selectors: selectors},
			wantErr: "the APIRule names no gateway",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Translate(tc.input)
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// Overlapping rules with other authentication are fine where Istio cannot
// mix them up: disjoint methods, or pods that no Service has in common.
func TestCoveredRulesThatCannotMeet(t *testing.T) {
	tests := map[string][]porticov1alpha1.Rule{
		"disjoint methods": {
			{Path: "/api/*", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
			{Path: "/api/admin", Methods: []porticov1alpha1.HTTPMethod{"POST"}, JWT: jwt("https://idp", nil, nil)},
		},
		"other pods": {
			{Path: "/api/*", NoAuth: ptr.To(true)},
			{Path: "/api/reports", JWT: jwt("https://idp", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 80}},
		},
		"other namespace": {
			{Path: "/api/*", NoAuth: ptr.To(true)},
			{Path: "/api/reports", JWT: jwt("https://idp", nil, nil), Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 80}},
		},
		"same authentication, audiences in another order": {
			{Path: "/api/*", JWT: jwt("https://idp", []string{"a", "b"}, nil)},
			{Path: "/api/admin", JWT: jwt("https://idp", []string{"b", "a"}, nil)},
		},
		"sibling path, not covered": {
			{Path: "/api/*", NoAuth: ptr.To(true)},
			{Path: "/api", JWT: jwt("https://idp", nil, nil)},
		},
	}
	for name, rules := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Translate(Input{APIRule: newAPIRule(withRules(rules...)), Selectors: selectors})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestPolicyName(t *testing.T) {
	long := strings.Repeat("x", 60)
	tests := map[string]struct {
		apiRule string
		backend types.NamespacedName
		want    string
	}{
		"default service":                {apiRule: "orders", backend: types.NamespacedName{Namespace: "shop", Name: "orders"}, want: "orders"},
		"another service":                {apiRule: "orders", backend: types.NamespacedName{Namespace: "shop", Name: "reports"}, want: "orders-reports"},
		"a service in another namespace": {apiRule: "orders", backend: types.NamespacedName{Namespace: "analytics", Name: "reports"}, want: "shop-orders-reports"},
		"too long": {apiRule: "orders", backend: types.NamespacedName{Namespace: "analytics", Name: long},
			want: "shop-orders-" + long[:40] + "-1ebdc062bd"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := PolicyName(newAPIRule(func(r *porticov1alpha1.APIRule) { r.Name = tc.apiRule }), tc.backend)
			g.Expect(len(got)).To(BeNumerically("<=", 63))
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestServices(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/a", NoAuth: ptr.To(true)},
		porticov1alpha1.Rule{Path: "/b", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "b", Port: 1}},
		porticov1alpha1.Rule{Path: "/c", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "b", Port: 2}},
	))
	g.Expect(Services(r)).To(Equal([]porticov1alpha1.ServiceReference{
		{Name: "b", Namespace: "shop", Port: 1},
		{Name: "b", Namespace: "shop", Port: 2},
		{Name: "orders", Namespace: "shop", Port: 8080},
	}))
	g.Expect(Backends(r)).To(Equal([]types.NamespacedName{{Namespace: "shop", Name: "b"}, {Namespace: "shop", Name: "orders"}}))
}

// The VirtualService binds to the gateway the controller resolved: the
// default gateway for an APIRule that names none.
func TestVirtualServiceGateway(t *testing.T) {
	tests := map[string]struct {
		spec, resolved, want string
	}{
		"the named gateway":                     {spec: "istio-system/public", want: "istio-system/public"},
		"the named gateway, resolved as itself": {spec: "istio-system/public", resolved: "istio-system/public", want: "istio-system/public"},
		"the default gateway":                   {resolved: "istio-system/portico-gateway", want: "istio-system/portico-gateway"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(func(r *porticov1alpha1.APIRule) { r.Spec.Gateway = tc.spec })
			out, err := Translate(Input{APIRule: r, Selectors: selectors, Gateway: tc.resolved})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.VirtualService.Spec.Gateways).To(Equal([]string{tc.want}))
			g.Expect(r.Spec.Gateway).To(Equal(tc.spec), "the APIRule is left as it was")
		})
	}
}
