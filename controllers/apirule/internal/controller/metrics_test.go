package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/test/testenv"
)

// sample is the value of a series of the controller's registry now.
var sample = testenv.SampleOf

// The controller's series follow real reconciles: the APIRules by Ready
// condition match the API server's, an APIRule refused counts once however
// often it is reconciled, each generation made Ready is timed once, and
// the objects written are counted.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	written := func(kind, op string) map[string]string {
		return map[string]string{"controller": "apirule", "kind": kind, "operation": op}
	}
	occupied := map[string]string{"kind": "APIRule", "reason": porticov1alpha1.ReasonHostOccupied}
	timed := map[string]string{"kind": "APIRule"}
	vsCreated, refusedBefore, timedBefore := sample(g, "portico_objects_written_total", written("VirtualService", metrics.Create)),
		sample(g, "portico_refusals_total", occupied), sample(g, "portico_spec_to_ready_seconds", timed)

	createServiceIn(t, ns, "metrics-a", nil)
	createServiceIn(t, otherNS, "metrics-b", nil)
	owner := apiRuleIn(t, ns, "metrics-owner", []porticov1alpha1.Hostname{"metrics.example.com"}, "metrics-a")
	expectReason(t, ns, "metrics-owner", porticov1alpha1.ReasonApplied)
	g.Eventually(func() float64 {
		return sample(g, "portico_objects_written_total", written("VirtualService", metrics.Create))
	}, eventually).Should(BeNumerically(">", vsCreated))
	g.Eventually(func() float64 { return sample(g, "portico_spec_to_ready_seconds", timed) }, eventually).Should(BeNumerically(">", timedBefore),
		"the first generation is timed")
	afterCreation(t, owner)

	apiRuleIn(t, otherNS, "metrics-thief", []porticov1alpha1.Hostname{"metrics.example.com"}, "metrics-b")
	expectReason(t, otherNS, "metrics-thief", porticov1alpha1.ReasonHostOccupied)
	g.Eventually(func() float64 { return sample(g, "portico_refusals_total", occupied) }, eventually).Should(BeNumerically(">", refusedBefore))
	refused := sample(g, "portico_refusals_total", occupied)

	t.Run("a refusal counts once, not per reconcile", func(t *testing.T) {
		g := NewWithT(t)
		// A new generation is reconciled and its status written, refused
		// again: no new transition.
		var generation int64
		g.Eventually(func() error {
			live := &porticov1alpha1.APIRule{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: "metrics-thief"}, live); err != nil {
				return err
			}
			live.Spec.Rules[0].Path = "/v2/*"
			if err := k8sClient.Update(ctx, live); err != nil {
				return err
			}
			generation = live.Generation
			return nil
		}, eventually).Should(Succeed())
		g.Eventually(func(g Gomega) {
			c := readyIn(g, otherNS, "metrics-thief")
			g.Expect(c.ObservedGeneration).To(Equal(generation))
			g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonHostOccupied))
		}, eventually).Should(Succeed())
		g.Consistently(func() float64 { return sample(g, "portico_refusals_total", occupied) }, 2*time.Second).Should(Equal(refused))
	})

	t.Run("the APIRules by Ready condition are the API server's", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			var rules porticov1alpha1.APIRuleList
			g.Expect(k8sClient.List(ctx, &rules)).To(Succeed())
			var objects [][2]string
			for _, r := range rules.Items {
				ready, reason := metrics.ReadyLabels(r.Status.Conditions, readyReasons)
				objects = append(objects, [2]string{ready, reason})
			}
			testenv.ExpectByReady(g, "portico_apirules", objects,
				[2]string{"True", porticov1alpha1.ReasonApplied}, [2]string{"False", porticov1alpha1.ReasonHostOccupied})
		}, eventually).Should(Succeed())
	})

	t.Run("a new generation made Ready is timed", func(t *testing.T) {
		g := NewWithT(t)
		before := sample(g, "portico_spec_to_ready_seconds", timed)
		updateAPIRule(t, "metrics-owner", func(r *porticov1alpha1.APIRule) { r.Spec.Rules[0].Path = "/v2/*" })
		g.Eventually(func(g Gomega) {
			c := readyCondition(g, "metrics-owner")
			g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonApplied))
		}, eventually).Should(Succeed())
		g.Eventually(func() float64 { return sample(g, "portico_spec_to_ready_seconds", timed) }, eventually).Should(BeNumerically(">", before))
	})

	t.Run("deleting an APIRule counts its objects' deletion", func(t *testing.T) {
		g := NewWithT(t)
		before := sample(g, "portico_objects_written_total", written("VirtualService", metrics.Delete))
		g.Expect(k8sClient.Delete(ctx, owner)).To(Succeed())
		g.Eventually(func() float64 {
			return sample(g, "portico_objects_written_total", written("VirtualService", metrics.Delete))
		}, eventually).Should(BeNumerically(">", before))
		// The host passes to the next claimant: a way out of a refusal is no
		// refusal.
		expectReason(t, otherNS, "metrics-thief", porticov1alpha1.ReasonApplied)
		g.Expect(sample(g, "portico_refusals_total", occupied)).To(Equal(refused))
	})
}
