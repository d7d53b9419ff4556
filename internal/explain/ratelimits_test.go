package explain

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func limit(ns, name string, kind gatewayv1alpha1.TargetKind, target, reason string, spec gatewayv1alpha1.RateLimitSpec) *gatewayv1alpha1.RateLimit {
	spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: kind, Name: target}
	rl := &gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if reason != "" {
		rl.Status.Conditions = []metav1.Condition{{Type: gatewayv1alpha1.ConditionReady, Reason: reason, Message: "m"}}
	}
	return rl
}

func TestExplainSaysWhichBucketsCountARequest(t *testing.T) {
	tb := func(n int64) *gatewayv1alpha1.TokenBucket {
		return &gatewayv1alpha1.TokenBucket{MaxTokens: n, TokensPerFill: n, FillInterval: metav1.Duration{Duration: time.Minute}}
	}
	local := gatewayv1alpha1.RateLimitSpec{Local: tb(100), Descriptors: []gatewayv1alpha1.Descriptor{
		{Path: "/admin", Bucket: tb(5)},
		{Header: &gatewayv1alpha1.HeaderMatch{Name: "X-Plan", Value: "free"}, Bucket: tb(10)},
	}}
	global := gatewayv1alpha1.RateLimitSpec{Global: &gatewayv1alpha1.GlobalRateLimit{Rules: []gatewayv1alpha1.GlobalRule{
		{Name: "all", Requests: 1000, Unit: gatewayv1alpha1.RateLimitUnit("Minute"),
			ClientKeys: []gatewayv1alpha1.ClientKey{{Type: gatewayv1alpha1.ClientKeyHeader, Header: "X-API-Key"}}},
		{Name: "reports", Requests: 10, Unit: gatewayv1alpha1.RateLimitUnit("Hour"), Match: &gatewayv1alpha1.GlobalMatch{Path: "/reports"}},
	}}}
	cases := []struct {
		name    string
		limits  []*gatewayv1alpha1.RateLimit
		query   Query
		want    []string
		without []string
	}{
		{"the APIRule's buckets that match", []*gatewayv1alpha1.RateLimit{limit("team-a", "rl", gatewayv1alpha1.TargetAPIRule, "ledger", gatewayv1alpha1.ReasonEnforced, local)},
			Query{Path: "/admin/users", Headers: map[string]string{"x-plan": "free"}},
			[]string{"RateLimit team-a/rl counts it in the route's own limits", "local bucket (100 tokens, 100 per 1m0s)", "descriptor 0's local bucket (5 tokens", "descriptor 1's"}, nil},
		{"a descriptor whose header value differs does not count", []*gatewayv1alpha1.RateLimit{limit("team-a", "rl", gatewayv1alpha1.TargetAPIRule, "ledger", gatewayv1alpha1.ReasonEnforced, local)},
			Query{Path: "/", Headers: map[string]string{"X-Plan": "paid"}}, []string{"local bucket (100 tokens"}, []string{"descriptor"}},
		{"global rules split per client key", []*gatewayv1alpha1.RateLimit{limit("team-a", "g", gatewayv1alpha1.TargetAPIRule, "ledger", gatewayv1alpha1.ReasonEnforced, global)},
			Query{Path: "/items", Headers: map[string]string{"x-api-key": "k1"}},
			[]string{`global rule all, 1000 per minute shared by every gateway pod, per header x-api-key "k1"`}, []string{"reports"}},
		{"a RateLimit not enforced counts nothing, and says why", []*gatewayv1alpha1.RateLimit{limit("team-a", "rl", gatewayv1alpha1.TargetAPIRule, "ledger", gatewayv1alpha1.ReasonConflicted, local)},
			Query{Path: "/admin"}, []string{"targets it but counts nothing: not enforced (Conflicted: m)"}, []string{"local bucket"}},
		{"another APIRule's limits do not count", []*gatewayv1alpha1.RateLimit{limit("team-a", "rl", gatewayv1alpha1.TargetAPIRule, "other", gatewayv1alpha1.ReasonEnforced, local)},
			Query{Path: "/admin"}, nil, []string{"ratelimit"}},
		{"a same-named APIRule of another namespace does not count", []*gatewayv1alpha1.RateLimit{limit("team-b", "rl", gatewayv1alpha1.TargetAPIRule, "ledger", gatewayv1alpha1.ReasonEnforced, local)},
			Query{Path: "/admin"}, nil, []string{"ratelimit"}},
		{"the gateway's own limits count", []*gatewayv1alpha1.RateLimit{limit("istio-system", "edge", gatewayv1alpha1.TargetGateway, "public", gatewayv1alpha1.ReasonEnforced, local)},
			Query{Path: "/"}, []string{"RateLimit istio-system/edge counts it in the gateway-wide limits"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			w := World{Gateway: "istio-system/public", RateLimits: c.limits}
			var e Explanation
			e.rateLimitSteps(w, "team-a/ledger", c.query)
			var text string
			for _, s := range e.Steps {
				text += s.Stage + " " + s.Finding + "\n"
			}
			for _, want := range c.want {
				g.Expect(text).To(ContainSubstring(want))
			}
			for _, not := range c.without {
				g.Expect(text).NotTo(ContainSubstring(not))
			}
		})
	}
}
