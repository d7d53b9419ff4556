package translate

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func ms(n int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(n) * time.Millisecond}
}

func TestRetries(t *testing.T) {
	tests := map[string]struct {
		policy      *gatewayv1alpha1.RetryPolicy
		ruleTimeout *metav1.Duration
		specTimeout *metav1.Duration
		wantRetryOn string
		wantErr     string
	}{
		"codes only": {
			policy:      &gatewayv1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503, 502, 503}},
			wantRetryOn: "502,503",
		},
		"conditions first, sorted, then codes": {
			policy:      &gatewayv1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{504}, RetryOn: []gatewayv1alpha1.RetryCondition{"reset", "5xx"}},
			wantRetryOn: "5xx,reset,504",
		},
		"per-try timeout within the rule's timeout": {
			policy:      &gatewayv1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: ms(500)},
			ruleTimeout: ms(500), specTimeout: ms(100), wantRetryOn: "503",
		},
		"per-try timeout beyond the rule's timeout": {
			policy:      &gatewayv1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: ms(501)},
			ruleTimeout: ms(500), wantErr: "exceeds the timeout",
		},
		"per-try timeout beyond spec.timeout": {
			policy:      &gatewayv1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}, PerTryTimeout: ms(2000)},
			specTimeout: ms(1000), wantErr: "exceeds the timeout",
		},
		"no attempts": {
			policy: &gatewayv1alpha1.RetryPolicy{Codes: []int32{503}}, wantErr: "attempts must be from 1 to 10",
		},
		"11 attempts": {
			policy: &gatewayv1alpha1.RetryPolicy{Attempts: 11, Codes: []int32{503}}, wantErr: "attempts must be from 1 to 10",
		},
		"nothing to retry on": {
			policy: &gatewayv1alpha1.RetryPolicy{Attempts: 1}, wantErr: "needs codes, retryOn or both",
		},
		"a code out of range": {
			policy: &gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{200}}, wantErr: "not from 400 to 599",
		},
		"an unknown condition": {
			policy:  &gatewayv1alpha1.RetryPolicy{Attempts: 1, RetryOn: []gatewayv1alpha1.RetryCondition{"5xx,reset"}},
			wantErr: "is not one of",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newAPIRule(withRules(gatewayv1alpha1.Rule{Path: "/orders/*", NoAuth: ptr.To(true), Timeout: tc.ruleTimeout, Retries: tc.policy}))
			r.Spec.Timeout = tc.specTimeout
			out, err := Translate(Input{APIRule: r, Selectors: selectors})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got := out.VirtualService.Spec.Http[0].Retries
			g.Expect(got.Attempts).To(Equal(tc.policy.Attempts))
			g.Expect(got.RetryOn).To(Equal(tc.wantRetryOn))
		})
	}
}

func TestHTTPRouteModeRefusesRetries(t *testing.T) {
	r := newAPIRule(withRules(gatewayv1alpha1.Rule{Path: "/orders/*", NoAuth: ptr.To(true),
		Retries: &gatewayv1alpha1.RetryPolicy{Attempts: 2, Codes: []int32{503}}}))
	r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Name: "edge"}
	_, err := Translate(Input{APIRule: r, Selectors: selectors, Parent: Parent(r)})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("retries, which need Istio mode")))
}
