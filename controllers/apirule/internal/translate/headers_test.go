package translate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

type responseSet = map[string]porticov1alpha1.ResponseHeaderValue

// securityHeaders are the response headers docs/api.md's example sets.
func securityHeaders() *porticov1alpha1.ResponseModifier {
	return &porticov1alpha1.ResponseModifier{
		Set: responseSet{
			"strict-transport-security": "max-age=31536000; includeSubDomains",
			"x-content-type-options":    "nosniff",
			"content-security-policy":   "default-src 'self'; frame-ancestors 'none'",
		},
		Add:    []porticov1alpha1.ResponseHeader{{Name: "vary", Value: "origin"}, {Name: "cache-control", Value: "no-store"}},
		Remove: []porticov1alpha1.ResponseHeaderName{"x-powered-by", "server"},
	}
}

func clientAddresses(allow, deny []porticov1alpha1.AddressBlock) *porticov1alpha1.ClientAddresses {
	return &porticov1alpha1.ClientAddresses{Allow: allow, Deny: deny}
}

// trusted is an administrator's trusted-proxy count of one load balancer.
var trusted = ptr.To[int32](1)

func TestHeadersAndClientAddressesGolden(t *testing.T) {
	headers := newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true), Response: &porticov1alpha1.ResponseModifier{
			Remove: []porticov1alpha1.ResponseHeaderName{"server"},
		}},
		porticov1alpha1.Rule{Path: "/orders/*", JWT: jwt("https://idp.example.com", nil, nil), Response: securityHeaders(),
			Request: &porticov1alpha1.RequestModifier{
				Headers:       map[string]porticov1alpha1.RequestHeaderValue{"x-api-version": "2"},
				RemoveHeaders: []porticov1alpha1.RemovedRequestHeader{"x-debug", "x-internal-flag"},
			}},
		porticov1alpha1.Rule{Path: "/reports/*", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000},
			Request: &porticov1alpha1.RequestModifier{RemoveHeaders: []porticov1alpha1.RemovedRequestHeader{"x-debug"}}},
	))
	goldenInput(t, "response-headers-and-removals", Input{APIRule: headers, Selectors: selectors})
	onGateway := headers.DeepCopy()
	onGateway.Spec.Gateway = ""
	onGateway.Spec.ParentRef = &porticov1alpha1.ParentReference{Namespace: "infra", Name: "public", SectionName: "https"}
	goldenInput(t, "response-headers-and-removals.httproute", Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})

	// Istio mode only (TestHTTPRouteModeRefusesClientAddresses): an office
	// allow list on a noAuth admin path, a jwt path that refuses a blocked
	// range, and a rule without addresses on other pods.
	clients := newAPIRule(withRules(
		porticov1alpha1.Rule{Path: "/health", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
		porticov1alpha1.Rule{Path: "/admin/*", NoAuth: ptr.To(true),
			ClientAddresses: clientAddresses([]porticov1alpha1.AddressBlock{"203.0.113.0/24", "2001:db8::/32"}, nil)},
		porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"GET"}, JWT: jwt("https://idp.example.com", []string{"shop"}, nil),
			ClientAddresses: clientAddresses(nil, []porticov1alpha1.AddressBlock{"198.51.100.0/24", "192.0.2.66"})},
	))
	goldenInput(t, "client-addresses", Input{APIRule: clients, Selectors: selectors, TrustedProxies: trusted})
}

// goldenInput compares a translation with testdata/<name>.golden.yaml.
func goldenInput(t *testing.T, name string, in Input) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		g := NewWithT(t)
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
	})
}

func TestHTTPRouteModeRefusesClientAddresses(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule(withRules(porticov1alpha1.Rule{Path: "/admin/*", NoAuth: ptr.To(true),
		ClientAddresses: clientAddresses([]porticov1alpha1.AddressBlock{"203.0.113.0/24"}, nil)}))
	r.Spec.Gateway, r.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "public"}
	_, err := Translate(Input{APIRule: r, Selectors: selectors, Parent: Parent(r), TrustedProxies: trusted})
	g.Expect(err).To(MatchError(ContainSubstring("rule /admin/* has clientAddresses, which need Istio mode: a standard HTTPRoute cannot match the client's address")))
}

func TestHeaderAndClientAddressRefusals(t *testing.T) {
	allow := []porticov1alpha1.AddressBlock{"203.0.113.0/24"}
	for name, tc := range map[string]struct {
		rules    []porticov1alpha1.Rule
		trusted  *int32
		wantErr  string
		withdraw bool
	}{
		"removing authorization": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Request: &porticov1alpha1.RequestModifier{RemoveHeaders: []porticov1alpha1.RemovedRequestHeader{"authorization"}}}},
			wantErr: "rule /* may not remove the header authorization", withdraw: true,
		},
		"removing x_forwarded_for, which backends read as x-forwarded-for": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Request: &porticov1alpha1.RequestModifier{RemoveHeaders: []porticov1alpha1.RemovedRequestHeader{"x_forwarded_for"}}}},
			wantErr: "which backends read as x-forwarded-for", withdraw: true,
		},
		"removing a header it sets": {
			rules: []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Request: &porticov1alpha1.RequestModifier{
				Headers: map[string]porticov1alpha1.RequestHeaderValue{"x-api": "1"}, RemoveHeaders: []porticov1alpha1.RemovedRequestHeader{"x_api"}}}},
			wantErr: "names the header x-api in request.headers and request.removeHeaders",
		},
		"setting set-cookie": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Response: &porticov1alpha1.ResponseModifier{Set: responseSet{"set-cookie": "session=fixed"}}}},
			wantErr: "response.set may not name set-cookie",
		},
		"adding a CORS header by another spelling": {
			rules: []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Response: &porticov1alpha1.ResponseModifier{
				Add: []porticov1alpha1.ResponseHeader{{Name: "access_control_allow_origin", Value: "*"}}}}},
			wantErr: "response.add may not name access_control_allow_origin (read as access-control-allow-origin)",
		},
		"a response header value with a command": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Response: &porticov1alpha1.ResponseModifier{Set: responseSet{"x-a": "%UPSTREAM_HOST%"}}}},
			wantErr: "a value must be 1 to 512 printable ASCII characters without '%'",
		},
		"set and remove one response header": {
			rules: []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), Response: &porticov1alpha1.ResponseModifier{
				Set: responseSet{"server": "portico"}, Remove: []porticov1alpha1.ResponseHeaderName{"server"}}}},
			wantErr: "names the header server in response.set and response.remove",
		},
		"client addresses before the administrator set trustedProxies": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), ClientAddresses: clientAddresses(allow, nil)}},
			wantErr: "the cluster administrator has not set how many proxies stand in front of the gateway",
		},
		"a CIDR with host bits": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), ClientAddresses: clientAddresses([]porticov1alpha1.AddressBlock{"10.1.2.3/8"}, nil)}},
			trusted: trusted, wantErr: `client address "10.1.2.3/8" must be an IP address or a CIDR block in canonical form`,
		},
		"no lists": {
			rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), ClientAddresses: clientAddresses(nil, nil)}},
			trusted: trusted, wantErr: "clientAddresses needs allow, deny or both",
		},
		"client addresses on a rule routed to another namespace": {
			rules: []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true), ClientAddresses: clientAddresses(allow, nil),
				Service: &porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}}},
			trusted: trusted, wantErr: "routes to service analytics/reports of another namespace, where the APIRule writes no access policy",
		},
		"33 removals over the rules": {
			rules: func() []porticov1alpha1.Rule {
				var out []porticov1alpha1.Rule
				for i := range 5 {
					rule := porticov1alpha1.Rule{Path: fmt.Sprintf("/r%d", i), NoAuth: ptr.To(true), Request: &porticov1alpha1.RequestModifier{}}
					for j := range 8 {
						if i < 4 || j == 0 {
							rule.Request.RemoveHeaders = append(rule.Request.RemoveHeaders, porticov1alpha1.RemovedRequestHeader(fmt.Sprintf("x-d%d", j)))
						}
					}
					out = append(out, rule)
				}
				return out
			}(),
			wantErr: "remove 33 request headers and list 0 client address blocks; an APIRule has at most 64, 32 and 64 in all",
		},
		// Istio adds up ALLOW rules: an open prefix would let every client
		// into the allow-listed path.
		"an open prefix covers an allow-listed path": {
			rules: []porticov1alpha1.Rule{
				{Path: "/*", NoAuth: ptr.To(true)},
				{Path: "/admin/*", NoAuth: ptr.To(true), ClientAddresses: clientAddresses(allow, nil)},
			},
			trusted: trusted, wantErr: "rule /* (noAuth) covers rule /admin/* (noAuth, clients in 203.0.113.0/24)",
		},
		"two matches of one request with other addresses": {
			rules: []porticov1alpha1.Rule{
				{Path: "/admin", NoAuth: ptr.To(true), ClientAddresses: clientAddresses(allow, nil)},
				{Path: "/admin", NoAuth: ptr.To(true), Match: &porticov1alpha1.RequestMatch{Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-beta", Exact: "1"}}}},
			},
			trusted: trusted, wantErr: "with different authentication",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Translate(Input{APIRule: newAPIRule(withRules(tc.rules...)), Selectors: selectors, TrustedProxies: tc.trusted})
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(errors.Is(err, ErrForgesRequest)).To(Equal(tc.withdraw), "%v", err)
		})
	}
}
