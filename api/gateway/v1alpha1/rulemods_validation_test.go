package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

type ruleCase struct {
	mutate  func(r *gatewayv1alpha1.APIRule)
	wantErr string
}

func runRuleCases(t *testing.T, tests map[string]ruleCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := validRule()
			tc.mutate(r)
			err := k8sClient.Create(context.Background(), r, client.DryRunAll)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func withRetries(p gatewayv1alpha1.RetryPolicy) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Retries = &p }
}

func TestAPIRuleRetriesValidation(t *testing.T) {
	onParent := func(mutate func(r *gatewayv1alpha1.APIRule)) func(r *gatewayv1alpha1.APIRule) {
		return func(r *gatewayv1alpha1.APIRule) {
			mutate(r)
			r.Spec.Gateway, r.Spec.ParentRef = "", &gatewayv1alpha1.ParentReference{Name: "edge"}
		}
	}
	runRuleCases(t, map[string]ruleCase{
		"codes and conditions": {mutate: withRetries(gatewayv1alpha1.RetryPolicy{
			Attempts: 10, PerTryTimeout: duration(time.Second), Codes: []int32{400, 599},
			RetryOn: []gatewayv1alpha1.RetryCondition{"5xx", "gateway-error", "reset", "connect-failure", "refused-stream", "retriable-4xx"},
		})},
		"no attempts": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Codes: []int32{503}}),
			wantErr: "spec.rules[1].retries.attempts: Invalid value: 0: spec.rules[1].retries.attempts in body should be greater than or equal to 1",
		},
		"11 attempts": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 11, Codes: []int32{503}}),
			wantErr: "should be less than or equal to 10",
		},
		"nothing to retry on": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1}),
			wantErr: "retries needs codes, retryOn or both",
		},
		"a 3xx code": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{302}}),
			wantErr: "should be greater than or equal to 400",
		},
		"a list of conditions in one": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, RetryOn: []gatewayv1alpha1.RetryCondition{"5xx,reset"}}),
			wantErr: "Unsupported value",
		},
		"17 codes": {
			mutate: withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{
				500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 510, 511, 512, 513, 514, 515, 516}}),
			wantErr: "must have at most 16 items",
		},
		"per-try timeout beyond the rule's timeout": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(2 * time.Second)})(r)
				r.Spec.Rules[1].Timeout = duration(time.Second)
			},
			wantErr: "retries.perTryTimeout may not exceed the rule's timeout",
		},
		"per-try timeout beyond spec.timeout": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(2 * time.Second)})(r)
				r.Spec.Timeout = duration(time.Second)
			},
			wantErr: "retries.perTryTimeout may not exceed spec.timeout",
		},
		"per-try timeout beyond spec.timeout, within the rule's": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(2 * time.Second)})(r)
				r.Spec.Timeout, r.Spec.Rules[1].Timeout = duration(time.Second), duration(3*time.Second)
			},
		},
		"per-try timeout of 1.5ms": {
			mutate:  withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}, PerTryTimeout: duration(1500 * time.Microsecond)}),
			wantErr: "perTryTimeout must be a duration from 1ms to 1h in whole milliseconds",
		},
		"retries in HTTPRoute mode": {
			mutate:  onParent(withRetries(gatewayv1alpha1.RetryPolicy{Attempts: 1, Codes: []int32{503}})),
			wantErr: "retries need Istio mode (gateway)",
		},
	})
}
