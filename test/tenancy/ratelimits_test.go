package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Class 4: one tenant's RateLimits, Gateways and APIRules cannot stop,
// stale or remove another tenant's limits, nor write into its namespace;
// every size a tenant controls is bounded at admission.
func TestRateLimitsAreIsolated(t *testing.T) {
	for _, attack := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"team-b's Gateway selecting team-a's ingress pods", gatewayOnForeignPods},
		{"team-b's pods carrying the labels of team-a's gateway pods", lookAlikePods},
		{"team-b piling its largest RateLimits onto one gateway workload", pileOfLargestLimits},
		{"team-b's route limit on team-a's gateway pods", routeLimitOnForeignPods},
		{"over-size RateLimits", expectOverSizeRejected},
	} {
		t.Run(attack.name, func(t *testing.T) {
			t.Parallel()
			attack.run(t)
		})
	}
}

// gatewayOnForeignPods: team-b's Gateway selects the pods of team-a's
// gateway, on which team-a has a gateway-wide limit.
func gatewayOnForeignPods(t *testing.T) {
	workloadPod(t, teamA, "edge-0", map[string]string{"app": "a-edge"}, "")
	create(t, alice, istioGateway(teamA, "edge", map[string]string{"app": "a-edge"}))
	limit := rateLimit(teamA, "edge-wide", gatewayv1alpha1.TargetGateway, "edge", 10)
	create(t, alice, limit)
	filters := expectLimitReason(t, limit, gatewayv1alpha1.ReasonEnforced).Status.EnvoyFilters

	create(t, bob, istioGateway(teamB, "edge-steal", map[string]string{"app": "a-edge"}))
	steal := rateLimit(teamB, "edge-steal", gatewayv1alpha1.TargetGateway, "edge-steal", 1)
	create(t, bob, steal)
	t.Run("team-b's gateway-wide limit on team-a's pods is NotEnforced", func(t *testing.T) {
		expectLimitReason(t, steal, gatewayv1alpha1.ReasonNotEnforced)
	})
	wait := followUp(t.Run("team-a's gateway-wide limit stays Enforced", func(t *testing.T) {
		NewWithT(t).Consistently(func(g Gomega) {
			_, c := limitOf(g, client.ObjectKeyFromObject(limit))
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), c.Message)
		}, 3*time.Second, poll).Should(Succeed())
	}))
	t.Run("team-a's EnvoyFilter keeps team-a's bucket", func(t *testing.T) {
		expectBuckets(t, filters, []string{""}, 10, wait)
	})
	t.Run("every EnvoyFilter holds one tenant's limits", func(t *testing.T) { expectFiltersIsolated(NewWithT(t)) })
}

// lookAlikePods: team-b runs pods labelled like team-a's gateway pods, so
// that team-a's Gateway selects pods of team-b's namespace too.
func lookAlikePods(t *testing.T) {
	labels := map[string]string{"app": "a-twin"}
	workloadPod(t, teamA, "twin-0", labels, "")
	create(t, alice, istioGateway(teamA, "twin", labels))
	limit := rateLimit(teamA, "twin-wide", gatewayv1alpha1.TargetGateway, "twin", 10)
	create(t, alice, limit)
	filters := expectLimitReason(t, limit, gatewayv1alpha1.ReasonEnforced).Status.EnvoyFilters

	lookAlike := ingressPod(teamB, "twin-impostor", labels)
	lookAlike.Spec.Containers[0].Image = "registry.example/app:1"
	create(t, bob, lookAlike)
	wait := followUp(t.Run("team-a's gateway-wide limit stays Enforced", func(t *testing.T) {
		NewWithT(t).Consistently(func(g Gomega) {
			got, c := limitOf(g, client.ObjectKeyFromObject(limit))
			g.Expect(c.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), c.Message)
			g.Expect(got.Status.EnvoyFilters).To(Equal(filters), "the filter stays where it was")
		}, 3*time.Second, poll).Should(Succeed())
	}))
	t.Run("team-a's EnvoyFilter keeps team-a's bucket", func(t *testing.T) {
		expectBuckets(t, filters, []string{""}, 10, wait)
	})
	t.Run("every EnvoyFilter holds one tenant's limits", func(t *testing.T) { expectFiltersIsolated(NewWithT(t)) })
}

// pileOfLargestLimits: team-b puts the largest RateLimits admission allows,
// on its largest APIRules, on the gateway pods team-a limits too, so that
// together they exceed what one EnvoyFilter may hold.
func pileOfLargestLimits(t *testing.T) {
	workloadPod(t, rootNamespace, "bulk-0", map[string]string{"istio": "bulk"}, "")
	create(t, admin, istioGateway(rootNamespace, "bulk", map[string]string{"istio": "bulk"}))
	steady := limitedAPIRule(t, "steady", rootNamespace+"/bulk")
	limit := rateLimit(teamA, "steady", gatewayv1alpha1.TargetAPIRule, "steady", 10)
	create(t, alice, limit)
	expectLimitReason(t, limit, gatewayv1alpha1.ReasonEnforced)

	var pile []*gatewayv1alpha1.RateLimit
	for i := range 3 {
		name := fmt.Sprintf("bulk-%d", i)
		create(t, bob, largestAPIRule(t, name, rootNamespace+"/bulk"))
		pile = append(pile, largestRateLimit(t, name, name))
	}
	for _, l := range pile {
		awaitLimitObserved(t, l)
	}
	update(t, alice, limit, func(l *gatewayv1alpha1.RateLimit) { l.Spec.Local.MaxTokens = 11 })
	t.Run("team-a's maxTokens change reaches its EnvoyFilter", func(t *testing.T) {
		live := expectLimitReason(t, limit, gatewayv1alpha1.ReasonEnforced)
		expectBuckets(t, live.Status.EnvoyFilters, routeNames(steady), 11, eventually)
	})
	t.Run("only team-b's RateLimits report the over-size EnvoyFilter", func(t *testing.T) {
		for _, l := range pile {
			expectLimitReason(t, l, gatewayv1alpha1.ReasonEnvoyFilterFailed)
		}
	})
	t.Run("every EnvoyFilter holds one tenant's limits", func(t *testing.T) { expectFiltersIsolated(NewWithT(t)) })
}

// routeLimitOnForeignPods: team-b's APIRule uses team-a's gateway, and
// team-b limits its routes there.
func routeLimitOnForeignPods(t *testing.T) {
	workloadPod(t, teamA, "own-edge-0", map[string]string{"app": "a-own-edge"}, "")
	create(t, alice, istioGateway(teamA, "own-edge", map[string]string{"app": "a-own-edge"}))
	limitedAPIRule(t, "rider", teamA+"/own-edge")
	create(t, alice, rateLimit(teamA, "rider", gatewayv1alpha1.TargetAPIRule, "rider", 10))
	create(t, bob, service(teamB, "rider"))
	create(t, bob, apiRule(teamB, "rider", "rider.b.example", teamA+"/own-edge", backend("", "rider"), noAuth("/*")))
	limit := rateLimit(teamB, "rider", gatewayv1alpha1.TargetAPIRule, "rider", 5)
	create(t, bob, limit)
	live, _ := awaitLimitObserved(t, limit)
	t.Run("writes no EnvoyFilter into team-a", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(live.Status.EnvoyFilters).NotTo(ContainElement(HavePrefix(teamA + "/")))
		var limits gatewayv1alpha1.RateLimitList
		g.Expect(admin.List(context.Background(), &limits)).To(Succeed())
		for _, ef := range managedFilters(g) {
			if ef.Namespace == teamA {
				g.Expect(contributors(g, ef, limits.Items)).NotTo(ContainElement(teamB), "EnvoyFilter %s/%s", ef.Namespace, ef.Name)
			}
		}
	})
	t.Run("every EnvoyFilter holds one tenant's limits", func(t *testing.T) { expectFiltersIsolated(NewWithT(t)) })
}

// expectOverSizeRejected checks that admission refuses RateLimits whose
// tenant-controlled sizes could make an EnvoyFilter too large to store.
func expectOverSizeRejected(t *testing.T) {
	for name, spec := range map[string]struct{ count, value, path int }{
		"with 64 descriptors":                             {64, 8, 2},
		"with a 64 KiB header value":                      {1, 64 << 10, 2},
		"with a 4 KiB descriptor path":                    {1, 8, 4 << 10},
		"with 32 descriptors of 1 KiB header values each": {32, 1 << 10, 2},
	} {
		t.Run("a RateLimit "+name+" is rejected", func(t *testing.T) {
			rl := rateLimit(teamB, "oversize", gatewayv1alpha1.TargetAPIRule, "bulk", 1)
			rl.Spec.Descriptors = descriptors(spec.count, spec.value, spec.path)
			err := bob.Create(context.Background(), rl, client.DryRunAll)
			NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		})
	}
}

// descriptors are count descriptors with a path and a header value of
// the given lengths. The value is made of '<', which JSON escapes to six
// bytes: the worst case for the size of the EnvoyFilter it renders into.
func descriptors(count, value, path int) []gatewayv1alpha1.Descriptor {
	out := make([]gatewayv1alpha1.Descriptor, count)
	for i := range out {
		out[i] = gatewayv1alpha1.Descriptor{
			Path:   "/" + strings.Repeat("p", path-1),
			Header: &gatewayv1alpha1.HeaderMatch{Name: "x-b", Value: strings.Repeat("<", value)},
		}
	}
	return out
}

// largestRateLimit creates team-b's biggest RateLimit admission lets
// through on one of its APIRules: for each number of descriptors, the
// longest header values admitted, and of those the one that renders the
// most bytes (each descriptor costs some 256 bytes of bucket and actions
// per route, each '<' of its value six).
func largestRateLimit(t *testing.T, name, target string) *gatewayv1alpha1.RateLimit {
	t.Helper()
	best, bestCount, bestValue := -1, 0, 0
	for _, count := range []int{64, 32, 16, 8, 4, 2, 1} {
		low, high := 0, 16<<10 // admitted, not admitted (or unknown)
		for low+1 < high {
			if mid := (low + high) / 2; admits(t, count, mid) {
				low = mid
			} else {
				high = mid
			}
		}
		if size := count * (256 + 6*low); low > 0 && size > best {
			best, bestCount, bestValue = size, count, low
		}
	}
	if best < 0 {
		t.Fatal("no RateLimit with descriptors is admitted")
	}
	t.Logf("the largest RateLimit admitted has %d descriptors with %d-character header values", bestCount, bestValue)
	rl := rateLimit(teamB, name, gatewayv1alpha1.TargetAPIRule, target, 1)
	rl.Spec.Descriptors = descriptors(bestCount, bestValue, 2)
	create(t, bob, rl)
	return rl
}

// admits reports whether the API server admits a RateLimit of team-b with
// count descriptors of value-character header values (a refusal is a
// validation error, or a request too large to read).
func admits(t *testing.T, count, value int) bool {
	rl := rateLimit(teamB, "probe", gatewayv1alpha1.TargetAPIRule, "probe", 1)
	rl.Spec.Descriptors = descriptors(count, value, 2)
	err := bob.Create(context.Background(), rl, client.DryRunAll)
	refused := apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err)
	NewWithT(t).Expect(err == nil || refused).To(BeTrue(), "dry-run create: %v", err)
	return err == nil
}

// largestAPIRule is team-b's APIRule with the most rules admission allows,
// each with a long path (so long route names), and creates its Service.
func largestAPIRule(t *testing.T, name, gateway string) *gatewayv1alpha1.APIRule {
	t.Helper()
	create(t, bob, service(teamB, name))
	var rules []gatewayv1alpha1.Rule
	for i := range 64 {
		rules = append(rules, noAuth(fmt.Sprintf("/r%02d/%s", i, strings.Repeat("x", 240))))
	}
	return apiRule(teamB, name, name+".b.example", gateway, backend("", name), rules...)
}

// limitedAPIRule is team-a's APIRule with its Service on a gateway.
func limitedAPIRule(t *testing.T, name, gateway string) *gatewayv1alpha1.APIRule {
	t.Helper()
	create(t, alice, service(teamA, name))
	rule := apiRule(teamA, name, name+".a.example", gateway, backend("", name), protectedAPI()...)
	create(t, alice, rule)
	return rule
}

func routeNames(rule *gatewayv1alpha1.APIRule) []string {
	var out []string
	for _, r := range rule.Spec.Rules {
		out = append(out, gatewayv1alpha1.RouteName(rule.Namespace, rule.Name, r))
	}
	return out
}

// expectBuckets checks, waiting at most wait, that the filters hold a
// bucket of maxTokens for every route ("" for gateway-wide), and no other
// size for them.
func expectBuckets(t *testing.T, filters []string, routes []string, maxTokens float64, wait time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(filters).NotTo(BeEmpty())
		found := map[string]bool{}
		for _, ref := range filters {
			ns, name, _ := strings.Cut(ref, "/")
			ef := &networkingv1alpha3.EnvoyFilter{}
			g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ef)).To(Succeed())
			for route, max := range buckets(g, ef) {
				if slices.Contains(routes, route) {
					g.Expect(max).To(Equal(maxTokens), "EnvoyFilter %s, route %q", ref, route)
					found[route] = true
				}
			}
		}
		g.Expect(found).To(HaveLen(len(routes)), "buckets of %v in %v", routes, filters)
	}, wait, poll).Should(Succeed())
}

// expectLimitReason waits for a RateLimit's Ready reason and returns it.
func expectLimitReason(t *testing.T, limit *gatewayv1alpha1.RateLimit, reason string) *gatewayv1alpha1.RateLimit {
	t.Helper()
	var live *gatewayv1alpha1.RateLimit
	NewWithT(t).Eventually(func(g Gomega) {
		l, c := limitOf(g, client.ObjectKeyFromObject(limit))
		g.Expect(c.Reason).To(Equal(reason), "RateLimit %s/%s: %s", limit.Namespace, limit.Name, c.Message)
		live = l
	}, eventually, poll).Should(Succeed())
	return live
}

// awaitLimitObserved waits until the controller has judged the RateLimit's
// current generation, whatever the verdict.
func awaitLimitObserved(t *testing.T, limit *gatewayv1alpha1.RateLimit) (*gatewayv1alpha1.RateLimit, string) {
	t.Helper()
	var live *gatewayv1alpha1.RateLimit
	var reason string
	NewWithT(t).Eventually(func(g Gomega) {
		l, c := limitOf(g, client.ObjectKeyFromObject(limit))
		live, reason = l, c.Reason
	}, eventually, poll).Should(Succeed())
	return live, reason
}
