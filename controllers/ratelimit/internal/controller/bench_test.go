package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

// benchLimits is how many RateLimits the benchmark's world holds, whatever
// its number of APIRules: a reconcile's work should follow them, not the
// APIRules nobody limits.
const benchLimits = 50

// BenchmarkReconcile reconciles a world of one Istio Gateway, its pod,
// benchLimits RateLimits on as many APIRules and 1,000 to 10,000 APIRules
// in 500 namespaces, at steady state (nothing to write). ns/op should not
// grow with the APIRules (issue 29: ≤ 20% from 1k to 10k).
func BenchmarkReconcile(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("apirules=%d", n), func(b *testing.B) {
			c := fakeClient(b, interceptor.Funcs{}, benchWorld(n, 500)...)
			r := &Reconciler{Client: c, Reader: c, GatewaysKnown: true, APIRulesKnown: true, RootNamespace: topology.DefaultRootNamespace}
			ctx := context.Background()
			if err := converge(ctx, r); err != nil { // converge: writes the filters and statuses
				b.Fatal(err)
			}
			enforced := 0
			var limits gatewayv1alpha1.RateLimitList
			if err := c.List(ctx, &limits); err != nil {
				b.Fatal(err)
			}
			for _, l := range limits.Items {
				for _, cond := range l.Status.Conditions {
					if cond.Type == gatewayv1alpha1.ConditionReady && cond.Reason == gatewayv1alpha1.ReasonEnforced {
						enforced++
					}
				}
			}
			if enforced != benchLimits {
				b.Fatalf("%d of %d RateLimits enforced", enforced, benchLimits)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := converge(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchWorld is n APIRules spread over namespaces on one Istio Gateway
// whose pod runs in Istio's root namespace; the first benchLimits of them
// are limited.
func benchWorld(n, namespaces int) []client.Object {
	objs := []client.Object{
		gatewayIn(topology.DefaultRootNamespace, "public", ingress),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: topology.DefaultRootNamespace, Name: "ingressgateway-1", Labels: ingress}},
	}
	for i := range n {
		ns := fmt.Sprintf("tenant-%03d", i%namespaces)
		name := fmt.Sprintf("api-%05d", i)
		rule := apiRule(ns, name, topology.DefaultRootNamespace+"/public", "/orders/*", "/carts")
		rule.Status.Conditions = []metav1.Condition{{Type: gatewayv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "served"}}
		objs = append(objs, rule)
		if i < benchLimits {
			objs = append(objs, rateLimit(ns, name, gatewayv1alpha1.TargetAPIRule, name, 100))
		}
	}
	return objs
}
