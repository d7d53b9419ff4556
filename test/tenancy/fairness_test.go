package tenancy

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Class 5: no tenant delays another. team-a's backlog of APIRules, queued
// ahead of team-b's single APIRule (created while the apirule controller was
// down, as after an outage or a restart, so the queue holds them all at
// once, team-a's first), does not hold team-b's up: the namespaces take
// turns. Judged on order, not on time: when team-b's APIRule is Applied,
// most of team-a's backlog is not yet. A first-in-first-out queue would
// apply all of team-a's first. (The bench, make bench-controllers phase 3,
// measures the same under a live flood.)
func TestABacklogDoesNotHoldUpAnotherTenant(t *testing.T) {
	const backlog = 200
	g := NewWithT(t)
	apirule := controllers["apirule"]
	apirule.stop()
	started := false
	t.Cleanup(func() {
		if !started {
			_ = apirule.start()
		}
	})

	create(t, alice, service(teamA, "backlog"))
	for i := range backlog {
		create(t, alice, apiRule(teamA, fmt.Sprintf("backlog-%03d", i), fmt.Sprintf("backlog-%03d.a.example", i), publicGateway, backend("", "backlog"), noAuth("/*")))
	}
	quiet := claimHost(t, "after-the-backlog", "after-the-backlog.b.example", publicGateway)

	g.Expect(apirule.start()).To(Succeed())
	started = true
	g.Expect(apirule.awaitReady(context.Background(), eventually)).To(Succeed())

	applied := func() int {
		var rules gatewayv1alpha1.APIRuleList
		g.Expect(admin.List(context.Background(), &rules, client.InNamespace(teamA))).To(Succeed())
		n := 0
		for _, r := range rules.Items {
			c := meta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionReady)
			if c != nil && c.Reason == gatewayv1alpha1.ReasonApplied && c.ObservedGeneration == r.Generation {
				n++
			}
		}
		return n
	}
	g.Eventually(func(g Gomega) {
		g.Expect(readyOf(g, client.ObjectKeyFromObject(quiet)).Reason).To(Equal(gatewayv1alpha1.ReasonApplied))
	}, 2*eventually, 20*time.Millisecond).Should(Succeed())
	n := applied()
	t.Logf("team-b's APIRule was Applied when %d of team-a's %d were", n, backlog)
	g.Expect(n).To(BeNumerically("<", backlog/2), "team-b's APIRule waited behind team-a's backlog")

	t.Run("team-a's backlog is applied too", func(t *testing.T) {
		NewWithT(t).Eventually(applied, 4*eventually, poll).Should(Equal(backlog))
	})
}
