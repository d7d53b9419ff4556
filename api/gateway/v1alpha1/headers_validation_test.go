package v1alpha1_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

func withResponse(m gatewayv1alpha1.ResponseModifier) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Response = &m }
}

func withRemovals(names ...gatewayv1alpha1.RemovedRequestHeader) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) {
		r.Spec.Rules[1].Request = &gatewayv1alpha1.RequestModifier{RemoveHeaders: names}
	}
}

func withClients(c gatewayv1alpha1.ClientAddresses) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].ClientAddresses = &c }
}

type responseSet = map[string]gatewayv1alpha1.ResponseHeaderValue

func TestAPIRuleRequestRemovalValidation(t *testing.T) {
	const reserved = "request.removeHeaders may not remove a header that carries the caller's identity"
	many := make([]gatewayv1alpha1.RemovedRequestHeader, 9)
	for i := range many {
		many[i] = gatewayv1alpha1.RemovedRequestHeader(fmt.Sprintf("x-debug-%d", i))
	}
	runRuleCases(t, map[string]ruleCase{
		"a debug header":                   {mutate: withRemovals("x-debug", "x-internal-flag")},
		"8 headers":                        {mutate: withRemovals(many[:8]...)},
		"9 headers":                        {mutate: withRemovals(many...), wantErr: "must have at most 8 items"},
		"authorization":                    {mutate: withRemovals("authorization"), wantErr: reserved},
		"x-forwarded-for":                  {mutate: withRemovals("x-forwarded-for"), wantErr: reserved},
		"x_forwarded_for, as CGI reads it": {mutate: withRemovals("x_forwarded_for"), wantErr: reserved},
		"x.real.ip, as PHP reads it":       {mutate: withRemovals("x.real.ip"), wantErr: reserved},
		"an x-envoy header":                {mutate: withRemovals("x-envoy-original-path"), wantErr: reserved},
		"the trace":                        {mutate: withRemovals("traceparent"), wantErr: reserved},
		"upper case":                       {mutate: withRemovals("X-Debug"), wantErr: "must be lower-case HTTP header names"},
		"x-debug and x_debug, read as one": {mutate: withRemovals("x-debug", "x_debug"), wantErr: "request.removeHeaders names one header twice"},
		"an empty name":                    {mutate: withRemovals(""), wantErr: "should be at least 1 chars long"},
		"a header set and removed": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules[1].Request = &gatewayv1alpha1.RequestModifier{Headers: headers{"x-api": "1"}, RemoveHeaders: []gatewayv1alpha1.RemovedRequestHeader{"x_api"}}
		}, wantErr: "request names one header in headers and removeHeaders"},
		"a header set, another one removed": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules[1].Request = &gatewayv1alpha1.RequestModifier{Headers: headers{"x-api": "1"}, RemoveHeaders: []gatewayv1alpha1.RemovedRequestHeader{"x-debug"}}
		}},
	})
}

func TestAPIRuleResponseValidation(t *testing.T) {
	const reserved = "may not name the response's framing or connection"
	security := responseSet{
		"strict-transport-security": "max-age=31536000; includeSubDomains",
		"x-content-type-options":    "nosniff",
		"content-security-policy":   "default-src 'self'; frame-ancestors 'none'",
		"referrer-policy":           "no-referrer",
		"x-frame-options":           "DENY",
	}
	nine := responseSet{}
	for i := range 9 {
		nine[fmt.Sprintf("x-h%d", i)] = "1"
	}
	runRuleCases(t, map[string]ruleCase{
		"security headers": {mutate: withResponse(gatewayv1alpha1.ResponseModifier{
			Set: security, Add: []gatewayv1alpha1.ResponseHeader{{Name: "vary", Value: "origin"}},
			Remove: []gatewayv1alpha1.ResponseHeaderName{"server", "x-powered-by"},
		})},
		"9 set":                          {mutate: withResponse(gatewayv1alpha1.ResponseModifier{Set: nine}), wantErr: "must have at most 8 items"},
		"set-cookie":                     {mutate: withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"set-cookie": "session=fixed"}}), wantErr: reserved},
		"set_cookie, read as set-cookie": {mutate: withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"set_cookie": "session=fixed"}}), wantErr: reserved},
		"a CORS header":                  {mutate: withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"access-control-allow-origin": "*"}}), wantErr: reserved},
		"adding a CORS header": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Add: []gatewayv1alpha1.ResponseHeader{{Name: "access-control-allow-credentials", Value: "true"}}}),
			wantErr: "response headers may not name the response's framing",
		},
		"removing content-length": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Remove: []gatewayv1alpha1.ResponseHeaderName{"content-length"}}),
			wantErr: "response headers may not name the response's framing",
		},
		"removing set-cookie": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Remove: []gatewayv1alpha1.ResponseHeaderName{"set-cookie"}}),
			wantErr: "response headers may not name the response's framing",
		},
		"an x-envoy header": {mutate: withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"x-envoy-upstream-service-time": "0"}}), wantErr: reserved},
		"a value with %":    {mutate: withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"x-client": "%DOWNSTREAM_REMOTE_ADDRESS%"}}), wantErr: "a response header value must be printable ASCII without '%'"},
		"a value with a newline": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"x-a": "1\r\nset-cookie: s=1"}}),
			wantErr: "a response header value must be printable ASCII",
		},
		"set and remove one header": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"server": "portico"}, Remove: []gatewayv1alpha1.ResponseHeaderName{"server"}}),
			wantErr: "response names one header in set and remove",
		},
		"add and remove one header, spelled twice": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Add: []gatewayv1alpha1.ResponseHeader{{Name: "x-a", Value: "1"}}, Remove: []gatewayv1alpha1.ResponseHeaderName{"x_a"}}),
			wantErr: "response names one header in add and remove",
		},
		"set and add one header": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"vary": "origin"}, Add: []gatewayv1alpha1.ResponseHeader{{Name: "vary", Value: "accept"}}}),
			wantErr: "response names one header in set and add",
		},
		"set names one header twice": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Set: responseSet{"x-a": "1", "x.a": "2"}}),
			wantErr: "response.set names one header twice",
		},
		"add names one header twice": {
			mutate:  withResponse(gatewayv1alpha1.ResponseModifier{Add: []gatewayv1alpha1.ResponseHeader{{Name: "x-a", Value: "1"}, {Name: "x_a", Value: "2"}}}),
			wantErr: "response.add names one header twice",
		},
	})
}

func TestAPIRuleClientAddressesValidation(t *testing.T) {
	const invalid = "a client address must be an IP address or a CIDR block in canonical form"
	seventeen := make([]gatewayv1alpha1.AddressBlock, 17)
	for i := range seventeen {
		seventeen[i] = gatewayv1alpha1.AddressBlock(fmt.Sprintf("198.51.100.%d", i))
	}
	runRuleCases(t, map[string]ruleCase{
		"allow and deny": {mutate: withClients(gatewayv1alpha1.ClientAddresses{
			Allow: []gatewayv1alpha1.AddressBlock{"203.0.113.0/24", "2001:db8::/32", "198.51.100.7"},
			Deny:  []gatewayv1alpha1.AddressBlock{"203.0.113.128/25"},
		})},
		"neither":                {mutate: withClients(gatewayv1alpha1.ClientAddresses{}), wantErr: "clientAddresses needs allow, deny or both"},
		"host bits set":          {mutate: withClients(gatewayv1alpha1.ClientAddresses{Allow: []gatewayv1alpha1.AddressBlock{"10.1.2.3/8"}}), wantErr: invalid},
		"a name":                 {mutate: withClients(gatewayv1alpha1.ClientAddresses{Deny: []gatewayv1alpha1.AddressBlock{"evil.example.com"}}), wantErr: invalid},
		"a prefix too long":      {mutate: withClients(gatewayv1alpha1.ClientAddresses{Allow: []gatewayv1alpha1.AddressBlock{"10.0.0.0/33"}}), wantErr: invalid},
		"leading zeros":          {mutate: withClients(gatewayv1alpha1.ClientAddresses{Allow: []gatewayv1alpha1.AddressBlock{"010.0.0.1"}}), wantErr: invalid},
		"an IPv4-mapped address": {mutate: withClients(gatewayv1alpha1.ClientAddresses{Allow: []gatewayv1alpha1.AddressBlock{"::ffff:10.0.0.1"}}), wantErr: invalid},
		"with parentRef": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withClients(gatewayv1alpha1.ClientAddresses{Allow: []gatewayv1alpha1.AddressBlock{"203.0.113.0/24"}})(r)
				r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Name: "edge"}
			},
			wantErr: "clientAddresses need Istio mode",
		},
		"17 blocks": {mutate: withClients(gatewayv1alpha1.ClientAddresses{Allow: seventeen}), wantErr: "must have at most 16 items"},
	})
}

// The CRD's CEL rule on response header names is built from the Go lists
// the controller checks with, as the request side's is.
func TestReservedResponseHeadersRuleIsTheGoList(t *testing.T) {
	g := NewWithT(t)
	var prefixes []string
	for _, p := range gatewayv1alpha1.ReservedResponseHeaderPrefixes {
		prefixes = append(prefixes, "!n.startsWith('"+p+"')")
	}
	body := fmt.Sprintf("!(n in ['%s']) && %s)", strings.Join(gatewayv1alpha1.ReservedResponseHeaders, "','"), strings.Join(prefixes, " && "))
	crds, err := testenv.ReadCRDs(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "gateway.portico.dev_apirules.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).To(HaveLen(1))
	for _, v := range crds[0].Spec.Versions {
		response := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["rules"].Items.Schema.Properties["response"]
		var rules []string
		for _, rule := range response.Properties["set"].XValidations {
			rules = append(rules, rule.Rule)
		}
		g.Expect(rules).To(ContainElement("self.all(k, [k.lowerAscii().replace('_', '-').replace('.', '-')].all(n, " + body + ")"))
		rules = nil
		for _, rule := range response.Properties["remove"].Items.Schema.XValidations {
			rules = append(rules, rule.Rule)
		}
		g.Expect(rules).To(ContainElement("[self.lowerAscii().replace('_', '-').replace('.', '-')].all(n, " + body))
	}
}

// The removal rule spells the request.headers lists.
func TestRemovedRequestHeaderRuleIsTheGoList(t *testing.T) {
	g := NewWithT(t)
	var prefixes []string
	for _, p := range gatewayv1alpha1.ReservedRequestHeaderPrefixes {
		prefixes = append(prefixes, "!n.startsWith('"+p+"')")
	}
	want := fmt.Sprintf("[self.lowerAscii().replace('_', '-').replace('.', '-')].all(n, !(n in ['%s']) && %s)",
		strings.Join(gatewayv1alpha1.ReservedRequestHeaders, "','"), strings.Join(prefixes, " && "))
	crds, err := testenv.ReadCRDs(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "gateway.portico.dev_apirules.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range crds[0].Spec.Versions {
		items := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["rules"].Items.Schema.Properties["request"].Properties["removeHeaders"].Items.Schema
		var rules []string
		for _, rule := range items.XValidations {
			rules = append(rules, rule.Rule)
		}
		g.Expect(rules).To(ContainElement(want))
	}
}

func TestReservedResponseHeaders(t *testing.T) {
	g := NewWithT(t)
	for name, want := range map[string]bool{
		"set-cookie": true, "Set_Cookie": true, "content-length": true, "access-control-allow-origin": true,
		"access_control_allow_origin": true, "x-envoy-upstream-service-time": true, "x-portico-x": true,
		"strict-transport-security": false, "server": false, "x-powered-by": false, "cookie": false,
	} {
		g.Expect(gatewayv1alpha1.IsReservedResponseHeader(name)).To(Equal(want), name)
	}
}

// kubectl explain documents the response headers, removals and client
// addresses: their bounds, what they refuse and why.
func TestKubectlExplainDocumentsHeadersAndClientAddresses(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.rules.response":              {"security headers", "set-cookie", "Both modes"},
		"apirules.spec.rules.response.set":          {"at most 8", "strict-transport-security", "access-control-*", "spec.cors owns them"},
		"apirules.spec.rules.response.add":          {"appends"},
		"apirules.spec.rules.response.remove":       {"server", "x-powered-by"},
		"apirules.spec.rules.request.removeHeaders": {"at most 8", "x-forwarded-for", "who the backend's access policy sees"},
		"apirules.spec.rules.clientAddresses":       {"X-Forwarded-For", "spec.apiRules.trustedProxies", "remoteIpBlocks", "Istio mode only", "gateway's namespace"},
		"apirules.spec.rules.clientAddresses.allow": {"at most 16"},
		"apirules.spec.rules.clientAddresses.deny":  {"even one that allow lets through"},
	} {
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			out = strings.Join(strings.Fields(out), " ")
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
