package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// maxStoredAPIRuleBytes is what etcd stores at most in one object by
// default (its --max-request-bytes, 1.5 MiB); the API server refuses to
// write a larger object.
const maxStoredAPIRuleBytes = 3 << 19

// text is n characters: prefix, then filler.
func text(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix))
}

// largestJWTList is the list form of jwt at its bounds: 4 issuers, whose
// 8 places are headers with the longest names and prefixes, and 16
// audiences (longer than scopes) in 2 alternatives.
func largestJWTList(rule int) *gatewayv1alpha1.JWTAuthentication {
	j := &gatewayv1alpha1.JWTAuthentication{}
	for i := range 4 {
		iss := gatewayv1alpha1.JWTIssuer{
			Issuer:  text(fmt.Sprintf("https://i%d.r%d.", i, rule), 256),
			JWKSURI: text(fmt.Sprintf("https://keys.example.com/%d/%d/", rule, i), 512),
		}
		for h := range 2 {
			iss.FromHeaders = append(iss.FromHeaders, gatewayv1alpha1.JWTHeader{Name: text(fmt.Sprintf("h%d-", h), 128), Prefix: text("Bearer ", 64)})
		}
		j.Authentications = append(j.Authentications, iss)
	}
	for a := range 2 {
		var alt gatewayv1alpha1.JWTAuthorization
		for k := range 8 {
			alt.Audiences = append(alt.Audiences, text(fmt.Sprintf("a%d.%d.", a, k), 256))
		}
		j.Authorizations = append(j.Authorizations, alt)
	}
	return j
}

// largestJWTSingle is the single-issuer form of jwt at its bounds.
func largestJWTSingle(rule int) *gatewayv1alpha1.JWTAuthentication {
	j := &gatewayv1alpha1.JWTAuthentication{Issuer: text(fmt.Sprintf("https://i.r%d.", rule), 512), JWKSURI: text(fmt.Sprintf("https://keys.example.com/%d/", rule), 1024)}
	for k := range 16 {
		j.RequiredScopes = append(j.RequiredScopes, text(fmt.Sprintf("s%d.", k), 128))
		j.Audiences = append(j.Audiences, text(fmt.Sprintf("a%d.", k), 256))
	}
	return j
}

// largestAPIRule fills every field of an APIRule to its bounds: 16 hosts
// of 253 characters, a full CORS policy, and 64 rules with the longest
// paths, every method, 8 weighted backends in other namespaces, a timeout, the
// largest retries, request headers, cookies and removals, response
// headers, client addresses, rewrite and match, and the largest jwt of one
// form.
func largestAPIRule(name string, jwt func(rule int) *gatewayv1alpha1.JWTAuthentication) *gatewayv1alpha1.APIRule {
	r := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: text(name, 63), Namespace: ns}}
	for i := range 16 {
		label := func(c string, n int) string { return strings.Repeat(c, n) }
		r.Spec.Hosts = append(r.Spec.Hosts, gatewayv1alpha1.Hostname(fmt.Sprintf("h%02d", i)+label("a", 60)+"."+label("b", 63)+"."+label("c", 63)+"."+label("d", 61)))
	}
	r.Spec.Gateway = text("g", 63) + "/" + text("g", 253)
	timeout := &metav1.Duration{Duration: 59*60e9 + 59e9 + 999e6}
	r.Spec.Timeout = timeout
	r.Spec.Service = &gatewayv1alpha1.ServiceReference{Name: text("s", 63), Namespace: text("n", 63), Port: 65535}
	methods := []gatewayv1alpha1.HTTPMethod{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	cors := &gatewayv1alpha1.CORSPolicy{AllowMethods: methods, AllowCredentials: ptr.To(true), MaxAge: &metav1.Duration{Duration: 86400e9}}
	for i := range 32 {
		cors.AllowOrigins = append(cors.AllowOrigins, text(fmt.Sprintf("https://o%02d.", i), 253))
		cors.AllowHeaders = append(cors.AllowHeaders, text(fmt.Sprintf("x-a%02d-", i), 128))
		cors.ExposeHeaders = append(cors.ExposeHeaders, text(fmt.Sprintf("x-e%02d-", i), 128))
	}
	r.Spec.CORS = cors
	var codes []int32
	for j := range 16 {
		codes = append(codes, int32(500+j))
	}
	for i := range 64 {
		r.Spec.Rules = append(r.Spec.Rules, gatewayv1alpha1.Rule{
			Path:    text(fmt.Sprintf("/r%02d/", i), 256),
			Methods: methods,
			// backends are larger than a service, which they exclude.
			Backends: largestBackends(i),
			Timeout:  timeout,
			JWT:      jwt(i),
			Retries:  &gatewayv1alpha1.RetryPolicy{Attempts: 10, PerTryTimeout: timeout, RetryOn: gatewayv1alpha1.RetryConditions, Codes: codes},
			Request:  largestRequest(),
			Rewrite:  &gatewayv1alpha1.Rewrite{Path: gatewayv1alpha1.RewritePath(text("/v", 256))},
			Match:    largestMatch(),
		})
	}
	// The response headers, request header removals and client address
	// blocks at their totals per APIRule, on the first rules. The API
	// server admits client addresses beside backends in other namespaces;
	// the controller refuses the pair.
	for i := range gatewayv1alpha1.MaxResponseHeadersPerAPIRule / 8 {
		r.Spec.Rules[i].Response = largestResponse()
	}
	for i := range gatewayv1alpha1.MaxRemovedHeadersPerAPIRule / 8 {
		r.Spec.Rules[i].Request.RemoveHeaders = largestRemovals()
	}
	for i := range gatewayv1alpha1.MaxAddressBlocksPerAPIRule / 32 {
		r.Spec.Rules[i].ClientAddresses = largestClientAddresses()
	}
	return r
}

// largestBackends is 8 backends in another namespace, with the longest
// names, the largest port and two-digit weights.
func largestBackends(rule int) []gatewayv1alpha1.WeightedBackend {
	var out []gatewayv1alpha1.WeightedBackend
	for b := range gatewayv1alpha1.MaxWeightedBackends {
		out = append(out, gatewayv1alpha1.WeightedBackend{
			Service: gatewayv1alpha1.ServiceReference{Name: text(fmt.Sprintf("s%02d-%d-", rule, b), 63), Namespace: text(fmt.Sprintf("n%d-", b), 63), Port: 65535},
			Weight:  12 + int32(b/4), // 4×12 + 4×13 = 100
		})
	}
	return out
}

// largestMatch is 8 header matches (8 in all) with the longest names and
// values; a query parameter match is no larger.
func largestMatch() *gatewayv1alpha1.RequestMatch {
	m := &gatewayv1alpha1.RequestMatch{}
	for j := range 8 {
		m.Headers = append(m.Headers, gatewayv1alpha1.RuleHeaderMatch{Name: text(fmt.Sprintf("m%d-", j), 128), Regex: text("v", 256)})
	}
	return m
}

// largestExtAuthAPIRule is largestAPIRule with every rule's jwt moved
// into extAuth: the longest authorizer name and the largest jwt, the
// list form, as its restrictions (a rule has one of noAuth, jwt and
// extAuth, and extAuth is the largest).
func largestExtAuthAPIRule() *gatewayv1alpha1.APIRule {
	r := largestAPIRule("worst-extauth-", largestJWTList)
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		rule.ExtAuth = &gatewayv1alpha1.ExtAuth{Authorizers: []string{text(fmt.Sprintf("authz-%02d-", i), 63)}, Restrictions: rule.JWT}
		rule.JWT = nil
	}
	return r
}

// largestRequest is 8 headers and 8 cookies at their longest.
func largestRequest() *gatewayv1alpha1.RequestModifier {
	m := &gatewayv1alpha1.RequestModifier{
		Headers: map[string]gatewayv1alpha1.RequestHeaderValue{},
		Cookies: map[string]gatewayv1alpha1.CookieValue{},
	}
	for j := range 8 {
		m.Headers[text(fmt.Sprintf("h%d-", j), 64)] = gatewayv1alpha1.RequestHeaderValue(text("v", 512))
		m.Cookies[text(fmt.Sprintf("c%d", j), 64)] = gatewayv1alpha1.CookieValue(text("v", 256))
	}
	return m
}

// largestRemovals is 8 request header removals at their longest.
func largestRemovals() []gatewayv1alpha1.RemovedRequestHeader {
	var out []gatewayv1alpha1.RemovedRequestHeader
	for j := range 8 {
		out = append(out, gatewayv1alpha1.RemovedRequestHeader(text(fmt.Sprintf("r%d-", j), 64)))
	}
	return out
}

// largestResponse is 8 headers added at their longest (8 of an APIRule's
// 64): an added header is stored larger than a set one (its list entry
// repeats the name in the managed fields), a removal smaller.
func largestResponse() *gatewayv1alpha1.ResponseModifier {
	m := &gatewayv1alpha1.ResponseModifier{}
	for j := range 8 {
		m.Add = append(m.Add, gatewayv1alpha1.ResponseHeader{Name: gatewayv1alpha1.ResponseHeaderName(text(fmt.Sprintf("a%d-", j), 64)), Value: gatewayv1alpha1.ResponseHeaderValue(text("v", 512))})
	}
	return m
}

// largestClientAddresses is 16 allowed and 16 denied IPv6 blocks of the
// longest form (43 characters).
func largestClientAddresses() *gatewayv1alpha1.ClientAddresses {
	c := &gatewayv1alpha1.ClientAddresses{}
	for j := range 16 {
		c.Allow = append(c.Allow, gatewayv1alpha1.AddressBlock(fmt.Sprintf("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff%02x/128", j)))
		c.Deny = append(c.Deny, gatewayv1alpha1.AddressBlock(fmt.Sprintf("eeee:ffff:ffff:ffff:ffff:ffff:ffff:ff%02x/128", j)))
	}
	return c
}

// TestWorstCaseAPIRuleIsStored creates the largest APIRule admission lets
// through and measures it as the API server stores it (JSON, with its
// managed fields, which repeat the keys of every list): it must fit in one
// etcd object, or a tenant's valid APIRule could not be written.
func TestWorstCaseAPIRuleIsStored(t *testing.T) {
	for form, build := range map[string]func() *gatewayv1alpha1.APIRule{
		"single-issuer": func() *gatewayv1alpha1.APIRule { return largestAPIRule("worst-single-issuer-", largestJWTSingle) },
		"list":          func() *gatewayv1alpha1.APIRule { return largestAPIRule("worst-list-", largestJWTList) },
		"extAuth list":  largestExtAuthAPIRule,
	} {
		t.Run("jwt in the "+form+" form", func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			r := build()
			g.Expect(k8sClient.Create(ctx, r)).To(Succeed())
			t.Cleanup(func() { _ = k8sClient.Delete(ctx, r) })
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(gatewayv1alpha1.GroupVersion.WithKind("APIRule"))
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), stored)).To(Succeed())
			raw, err := json.Marshal(stored.Object)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("worst-case APIRule, jwt in the %s form: %d bytes (%d KiB) stored, of etcd's %d KiB", form, len(raw), len(raw)>>10, maxStoredAPIRuleBytes>>10)
			g.Expect(len(raw)).To(BeNumerically("<", maxStoredAPIRuleBytes))
		})
	}
	t.Run("the bounds are the bounds: one more response header, removal or client address block is refused", func(t *testing.T) {
		for what, mutate := range map[string]func(r *gatewayv1alpha1.APIRule){
			"response header": func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[10].Response = &gatewayv1alpha1.ResponseModifier{Remove: []gatewayv1alpha1.ResponseHeaderName{"server"}}
			},
			"removal": func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[10].Request.RemoveHeaders = []gatewayv1alpha1.RemovedRequestHeader{"x-debug"}
			},
			"client address block": func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[10].ClientAddresses = &gatewayv1alpha1.ClientAddresses{Allow: []gatewayv1alpha1.AddressBlock{"10.0.0.0/8"}}
			},
		} {
			more := largestAPIRule("more-", largestJWTSingle)
			mutate(more)
			NewWithT(t).Expect(k8sClient.Create(context.Background(), more, client.DryRunAll)).To(MatchError(ContainSubstring("in all, so that the APIRule fits in one stored object")), what)
		}
	})
	t.Run("the bounds are the bounds: a longer header value is refused", func(t *testing.T) {
		more := largestAPIRule("larger-", largestJWTSingle)
		more.Spec.Rules[0].Request.Headers[text("h0-", 64)] += "v"
		NewWithT(t).Expect(k8sClient.Create(context.Background(), more)).To(MatchError(ContainSubstring("may not be more than 512")))
	})
}

// The list form's bounds on the whole rule: 8 token places, 16 scopes
// and audiences.
func TestJWTListTotals(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate  func(j *gatewayv1alpha1.JWTAuthentication)
		wantErr string
	}{
		"at the bounds": {mutate: func(*gatewayv1alpha1.JWTAuthentication) {}},
		"a ninth place": {
			mutate:  func(j *gatewayv1alpha1.JWTAuthentication) { j.Authentications[0].FromParams = []string{"token"} },
			wantErr: "the issuers of a rule read tokens from at most 8 places in all",
		},
		"a seventeenth audience": {
			mutate: func(j *gatewayv1alpha1.JWTAuthentication) {
				j.Authorizations = append(j.Authorizations, gatewayv1alpha1.JWTAuthorization{Audiences: []string{"one-more"}})
			},
			wantErr: "the authorizations of a rule name at most 16 scopes and audiences in all",
		},
		"an issuer beyond 256 characters": {
			mutate:  func(j *gatewayv1alpha1.JWTAuthentication) { j.Authentications[0].Issuer = text("https://", 257) },
			wantErr: "Too long",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := validRule()
			r.Spec.Rules[1].JWT = largestJWTList(1)
			tc.mutate(r.Spec.Rules[1].JWT)
			err := k8sClient.Create(context.Background(), r, client.DryRunAll)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
