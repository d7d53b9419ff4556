package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/test/testenv"
)

// sample is the value of a series of the controller's registry now.
var sample = testenv.SampleOf

// The controller's series follow real reconciles: the RateLimits by Ready
// condition match the API server's, a conflict counts once however often
// the world is reconciled, each generation made Ready is timed, and the
// EnvoyFilters written are counted.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	written := func(op string) map[string]string {
		return map[string]string{"controller": "ratelimit", "kind": "EnvoyFilter", "operation": op}
	}
	conflicted := map[string]string{"kind": "RateLimit", "reason": gatewayv1alpha1.ReasonConflicted}
	timed := map[string]string{"kind": "RateLimit"}
	created, refusedBefore, timedBefore := sample(g, "portico_objects_written_total", written(metrics.Create)),
		sample(g, "portico_refusals_total", conflicted), sample(g, "portico_spec_to_ready_seconds", timed)

	gatewayPod(t, "istio-system", "metrics-ingress", ingress)
	create(t, gateway("metrics"))
	create(t, apiRule("edge", "metrics", "istio-system/metrics", "/orders/*"))
	first := rateLimit("edge", "metrics-first", gatewayv1alpha1.TargetAPIRule, "metrics", 100)
	create(t, first)
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "edge", "metrics-first").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
	}, eventually).Should(Succeed())
	g.Eventually(func() float64 { return sample(g, "portico_objects_written_total", written(metrics.Create)) }, eventually).
		Should(BeNumerically(">", created))
	g.Eventually(func() float64 { return sample(g, "portico_spec_to_ready_seconds", timed) }, eventually).
		Should(BeNumerically(">", timedBefore), "the first generation is timed")

	// A newer RateLimit on the same APIRule is refused.
	time.Sleep(time.Until(creationOf(g, first).Add(time.Second)))
	create(t, rateLimit("edge", "metrics-second", gatewayv1alpha1.TargetAPIRule, "metrics", 5))
	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "edge", "metrics-second").Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
	}, eventually).Should(Succeed())
	g.Eventually(func() float64 { return sample(g, "portico_refusals_total", conflicted) }, eventually).Should(BeNumerically(">", refusedBefore))
	refused := sample(g, "portico_refusals_total", conflicted)

	t.Run("a refusal counts once, not per reconcile", func(t *testing.T) {
		g := NewWithT(t)
		// A new generation of the refused RateLimit: its status is written
		// again (observedGeneration), still Conflicted.
		var generation int64
		g.Eventually(func() error {
			live := &gatewayv1alpha1.RateLimit{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "edge", Name: "metrics-second"}, live); err != nil {
				return err
			}
			live.Spec.Local.MaxTokens = 6
			if err := k8sClient.Update(ctx, live); err != nil {
				return err
			}
			generation = live.Generation
			return nil
		}, eventually).Should(Succeed())
		g.Eventually(func(g Gomega) {
			c := verdict(g, "edge", "metrics-second")
			g.Expect(c.ObservedGeneration).To(Equal(generation))
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonConflicted))
		}, eventually).Should(Succeed())
		g.Consistently(func() float64 { return sample(g, "portico_refusals_total", conflicted) }, 2*time.Second).Should(Equal(refused))
	})

	t.Run("the RateLimits by Ready condition are the API server's", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			var limits gatewayv1alpha1.RateLimitList
			g.Expect(k8sClient.List(ctx, &limits)).To(Succeed())
			var objects [][2]string
			for _, l := range limits.Items {
				ready, reason := metrics.ReadyLabels(l.Status.Conditions, readyReasons)
				objects = append(objects, [2]string{ready, reason})
			}
			testenv.ExpectByReady(g, "portico_ratelimits", objects,
				[2]string{"True", gatewayv1alpha1.ReasonEnforced}, [2]string{"False", gatewayv1alpha1.ReasonConflicted})
		}, eventually).Should(Succeed())
	})

	t.Run("the next RateLimit takes over when the enforced one goes", func(t *testing.T) {
		g := NewWithT(t)
		timedBefore, updated := sample(g, "portico_spec_to_ready_seconds", timed), sample(g, "portico_objects_written_total", written(metrics.Update))
		g.Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(verdict(g, "edge", "metrics-second").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
		}, eventually).Should(Succeed())
		// Its generation was seen while refused, and is timed once Ready.
		g.Eventually(func() float64 { return sample(g, "portico_spec_to_ready_seconds", timed) }, eventually).
			Should(BeNumerically(">", timedBefore))
		// The tenant's filter now holds the second one's bucket.
		g.Eventually(func() float64 { return sample(g, "portico_objects_written_total", written(metrics.Update)) }, eventually).
			Should(BeNumerically(">", updated))
		g.Expect(sample(g, "portico_refusals_total", conflicted)).To(Equal(refused))
	})
}

// creationOf reads an object's creation time from the API server.
func creationOf(g Gomega, obj client.Object) time.Time {
	live := &gatewayv1alpha1.RateLimit{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), live)).To(Succeed())
	return live.CreationTimestamp.Time
}
