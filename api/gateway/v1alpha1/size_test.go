package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// etcdObjectLimit is etcd's default request size limit, which bounds one
// stored object.
const etcdObjectLimit = 1536 << 10

// padded is s followed by filler up to n characters.
func padded(s string, n int) string { return s + strings.Repeat("x", n-len(s)) }

// hostOf253 is a valid host name of 253 characters, distinct per i.
func hostOf253(i int) string {
	label := func(s string) string { return padded(s, 63) }
	return label(fmt.Sprintf("h%02d", i)) + "." + label("b") + "." + label("c") + "." + padded("d", 61)
}

// largestRule is a rule with every field at its bounds.
func largestRule(i int) gatewayv1alpha1.Rule {
	long := &metav1.Duration{Duration: time.Hour - time.Millisecond}
	rule := gatewayv1alpha1.Rule{
		Path:    padded(fmt.Sprintf("/r%02d/", i), 256),
		Methods: []gatewayv1alpha1.HTTPMethod{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"},
		Service: &gatewayv1alpha1.ServiceReference{Name: padded("s", 63), Namespace: padded("n", 63), Port: 65535},
		Timeout: long,
		JWT: &gatewayv1alpha1.JWTAuthentication{
			Issuer: padded("https://idp.example.com/", 512), JWKSURI: padded("https://idp.example.com/", 1024),
		},
		Retries: &gatewayv1alpha1.RetryPolicy{Attempts: 10, PerTryTimeout: long, RetryOn: gatewayv1alpha1.RetryConditions},
		Request: &gatewayv1alpha1.RequestModifier{
			Headers: map[string]gatewayv1alpha1.RequestHeaderValue{},
			Cookies: map[string]gatewayv1alpha1.CookieValue{},
		},
		Rewrite: &gatewayv1alpha1.Rewrite{Path: gatewayv1alpha1.RewritePath(padded("/v", 256))},
	}
	for j := range 16 {
		rule.JWT.Audiences = append(rule.JWT.Audiences, padded(fmt.Sprintf("a%02d", j), 256))
		rule.JWT.RequiredScopes = append(rule.JWT.RequiredScopes, padded(fmt.Sprintf("s%02d", j), 128))
		rule.Retries.Codes = append(rule.Retries.Codes, int32(500+j))
	}
	for j := range 8 {
		rule.Request.Headers[padded(fmt.Sprintf("h%d-", j), 64)] = gatewayv1alpha1.RequestHeaderValue(padded("v", 512))
		rule.Request.Cookies[padded(fmt.Sprintf("c%d", j), 64)] = gatewayv1alpha1.CookieValue(padded("v", 256))
	}
	return rule
}

// largestAPIRule is an APIRule with every list full and every string at
// its longest.
func largestAPIRule() *gatewayv1alpha1.APIRule {
	r := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: padded("largest", 63), Namespace: ns},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Gateway: padded("g", 63) + "/" + padded("g", 253),
			Service: &gatewayv1alpha1.ServiceReference{Name: padded("s", 63), Namespace: padded("n", 63), Port: 65535},
			Timeout: &metav1.Duration{Duration: time.Hour - time.Millisecond},
			CORS: &gatewayv1alpha1.CORSPolicy{
				AllowMethods:     []gatewayv1alpha1.HTTPMethod{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"},
				AllowCredentials: ptr.To(true), MaxAge: &metav1.Duration{Duration: 24 * time.Hour},
			},
		},
	}
	for i := range 16 {
		r.Spec.Hosts = append(r.Spec.Hosts, gatewayv1alpha1.Hostname(hostOf253(i)))
	}
	for i := range 32 {
		r.Spec.CORS.AllowOrigins = append(r.Spec.CORS.AllowOrigins, padded(fmt.Sprintf("https://o%02d.", i), 253))
		r.Spec.CORS.AllowHeaders = append(r.Spec.CORS.AllowHeaders, padded(fmt.Sprintf("x-a%02d", i), 128))
		r.Spec.CORS.ExposeHeaders = append(r.Spec.CORS.ExposeHeaders, padded(fmt.Sprintf("x-e%02d", i), 128))
	}
	for i := range 64 {
		r.Spec.Rules = append(r.Spec.Rules, largestRule(i))
	}
	return r
}

// The largest APIRule admission allows, stored with its managed fields,
// stays within etcd's object limit (docs/api.md gives the figure).
func TestLargestAPIRuleFitsEtcd(t *testing.T) {
	g := NewWithT(t)
	r := largestAPIRule()
	g.Expect(k8sClient.Create(context.Background(), r)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), r) })
	stored, err := json.Marshal(r)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the largest APIRule is stored in %d bytes (%d KiB) of etcd's %d KiB", len(stored), len(stored)>>10, etcdObjectLimit>>10)
	g.Expect(len(stored)).To(BeNumerically("<", etcdObjectLimit))
	// The bounds are the bounds: one more rule, or a longer header value, is refused.
	more := largestAPIRule()
	more.Name = padded("larger", 63)
	more.Spec.Rules[0].Request.Headers[padded("h0-", 64)] += "v"
	g.Expect(k8sClient.Create(context.Background(), more)).To(MatchError(ContainSubstring("may not be more than 512")))
}
