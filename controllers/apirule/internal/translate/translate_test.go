package translate

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

type apiRuleOption func(*gatewayv1alpha1.APIRule)

func newAPIRule(opts ...apiRuleOption) *gatewayv1alpha1.APIRule {
	r := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "uid-orders"},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:   []gatewayv1alpha1.Hostname{"orders.example.com"},
			Gateway: "istio-system/public",
			Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules: []gatewayv1alpha1.Rule{
				{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
			},
		},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func withRules(rules ...gatewayv1alpha1.Rule) apiRuleOption {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules = rules }
}

func jwt(issuer string, audiences, scopes []string) *gatewayv1alpha1.JWTAuthentication {
	return &gatewayv1alpha1.JWTAuthentication{Issuer: issuer, JWKSURI: issuer + "/jwks.json", Audiences: audiences, RequiredScopes: scopes}
}

var selector = map[string]string{"app": "orders"}

func TestTranslateGolden(t *testing.T) {
	tests := map[string]*gatewayv1alpha1.APIRule{
		"noauth": newAPIRule(),
		"jwt-with-claims": newAPIRule(withRules(
			gatewayv1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true)},
			gatewayv1alpha1.Rule{Path: "/orders/*", Methods: []gatewayv1alpha1.HTTPMethod{"POST", "GET"},
				JWT: jwt("https://idp.example.com", []string{"shop", "orders"}, []string{"orders.write", "orders.read"})},
			gatewayv1alpha1.Rule{Path: "/admin/*", JWT: jwt("https://admin-idp.example.com", nil, nil)},
		)),
		"routing-cors-timeouts": newAPIRule(func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Hosts = append(r.Spec.Hosts, "*.orders.example.com")
			r.Spec.Timeout = &metav1.Duration{Duration: 15 * time.Second}
			r.Spec.CORS = &gatewayv1alpha1.CORSPolicy{
				AllowOrigins: []string{"https://shop.example.com", "*"}, AllowMethods: []gatewayv1alpha1.HTTPMethod{"PUT", "GET"},
				AllowHeaders: []string{"Authorization"}, ExposeHeaders: []string{"X-Request-Id"},
				AllowCredentials: ptr.To(true), MaxAge: &metav1.Duration{Duration: 10 * time.Minute},
			}
			r.Spec.Rules = []gatewayv1alpha1.Rule{
				{Path: "/*", NoAuth: ptr.To(true)},
				{Path: "/reports/*", NoAuth: ptr.To(true), Timeout: &metav1.Duration{Duration: 2 * time.Minute},
					Service: &gatewayv1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}},
				{Path: "/orders", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
			}
		}),
	}
	for name, rule := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Translate(Input{APIRule: rule, Selector: selector})
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

			again, _ := yaml.Marshal(must(Translate(Input{APIRule: rule, Selector: selector})))
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
	out, err := Translate(Input{APIRule: newAPIRule(), Selector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.RequestAuthentication).To(BeNil())

	out, err = Translate(Input{APIRule: newAPIRule(withRules(gatewayv1alpha1.Rule{Path: "/a", JWT: jwt("https://idp", nil, nil)})), Selector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.RequestAuthentication).NotTo(BeNil())
	g.Expect(out.RequestAuthentication.Spec.JwtRules).To(HaveLen(1))
}

func TestTranslateErrors(t *testing.T) {
	tests := map[string]struct {
		input   Input
		wantErr string
	}{
		"service without selector": {
			input:   Input{APIRule: newAPIRule()},
			wantErr: "service orders has no pod selector",
		},
		"one issuer, two key sets": {
			input: Input{APIRule: newAPIRule(withRules(
				gatewayv1alpha1.Rule{Path: "/a", JWT: &gatewayv1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://idp/one"}},
				gatewayv1alpha1.Rule{Path: "/b", JWT: &gatewayv1alpha1.JWTAuthentication{Issuer: "https://idp", JWKSURI: "https://idp/two"}},
			)), Selector: selector},
			wantErr: "one issuer needs one key set",
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

func TestServices(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule(withRules(
		gatewayv1alpha1.Rule{Path: "/a", NoAuth: ptr.To(true)},
		gatewayv1alpha1.Rule{Path: "/b", NoAuth: ptr.To(true), Service: &gatewayv1alpha1.ServiceReference{Name: "b", Port: 1}},
	))
	g.Expect(Services(r)).To(Equal([]gatewayv1alpha1.ServiceReference{
		{Name: "b", Namespace: "shop", Port: 1},
		{Name: "orders", Namespace: "shop", Port: 8080},
	}))
}
