package controller

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// controllerRequests counts the API requests of the controller's manager,
// by method, except watches.
var controllerRequests requestCounter

type requestCounter struct {
	mu       sync.Mutex
	byMethod map[string]int
}

// wrap is a rest.Config's transport wrapper that counts.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			c.mu.Lock()
			if c.byMethod == nil {
				c.byMethod = map[string]int{}
			}
			c.byMethod[req.Method]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.byMethod {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// countedConfig is cfg with the controller's requests counted.
func countedConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(controllerRequests.wrap)
	return out
}

// reconciles is how many reconciles the apirule controller ran.
func reconciles(g Gomega) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelOf(m, "controller") == "apirule" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A bulk of new APIRules costs, per APIRule, the creates of its objects,
// the finalizer patch and one status patch (Applied), and no GET: an object
// the cache does not show is created, not looked for. Its own writes start
// no further reconcile; in HTTPRoute mode the Gateway's answer starts one,
// and no RoutePending is written when the answer comes in time.
func TestRequestsPerNewAPIRule(t *testing.T) {
	const n = 20
	createGatewayAPIGateway(t, "bulk-edge")
	for _, tc := range []struct {
		name   string
		routes bool
		// reconcilesPerRule is the reconciles of one APIRule: its creation,
		// and in HTTPRoute mode the Gateway's answer.
		reconcilesPerRule float64
	}{
		{name: "Istio", reconcilesPerRule: 1},
		{name: "HTTPRoute", routes: true, reconcilesPerRule: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prefix := "bulk-" + strings.ToLower(tc.name)
			// Cleanups run last first: this one, after the APIRules' deletion,
			// waits until they are gone, so that their release is not
			// counted in the next case.
			t.Cleanup(func() {
				NewWithT(t).Eventually(func() []porticov1alpha1.APIRule {
					var rules porticov1alpha1.APIRuleList
					_ = k8sClient.List(context.Background(), &rules, client.InNamespace(ns))
					var left []porticov1alpha1.APIRule
					for _, r := range rules.Items {
						if strings.HasPrefix(r.Name, prefix) {
							left = append(left, r)
						}
					}
					return left
				}, eventually).Should(BeEmpty())
			})
			for i := range n {
				createService(t, fmt.Sprintf("%s-%d", prefix, i))
			}
			if tc.routes {
				go answerRoutes(ctx, prefix, n)
			}
			// The window opens once the controller is quiet (the release of
			// earlier tests' APIRules is not counted).
			g.Eventually(func() bool {
				before := controllerRequests.snapshot()
				time.Sleep(time.Second)
				return len(before) > 0 && reflect.DeepEqual(before, controllerRequests.snapshot())
			}, eventually).Should(BeTrue())
			before, reconcilesBefore := controllerRequests.snapshot(), reconciles(g)
			for i := range n {
				name := fmt.Sprintf("%s-%d", prefix, i)
				if tc.routes {
					createRouteAPIRule(t, name, name, "bulk-edge", health)
				} else {
					createAPIRule(t, name, name, health)
				}
			}
			for i := range n {
				g.Eventually(func(g Gomega) {
					g.Expect(readyCondition(g, fmt.Sprintf("%s-%d", prefix, i)).Reason).To(Equal(porticov1alpha1.ReasonApplied))
				}, eventually).Should(Succeed())
			}
			// Late requests and reconciles (a requeue of one's own write)
			// would come within moments.
			time.Sleep(2 * time.Second)
			after := controllerRequests.snapshot()
			perRule := map[string]float64{}
			total := 0.0
			for method, count := range after {
				perRule[method] = float64(count-before[method]) / n
				total += perRule[method]
			}
			perRuleReconciles := (reconciles(g) - reconcilesBefore) / n
			t.Logf("per APIRule: %.2f requests %v, %.2f reconciles", total, perRule, perRuleReconciles)
			g.Expect(perRule[http.MethodGet]).To(BeNumerically("<=", 0.1), "no GET for an object the cache does not show")
			g.Expect(perRule[http.MethodPost]).To(BeNumerically("~", 2, 0.01), "one create per object: a policy and a route")
			g.Expect(perRule[http.MethodPatch]).To(BeNumerically("<=", 2.05), "the finalizer and one status (Applied)")
			g.Expect(total).To(BeNumerically("<=", 4.1))
			g.Expect(perRuleReconciles).To(BeNumerically("<=", tc.reconcilesPerRule+0.1))
		})
	}
}

// answerRoutes accepts the HTTPRoutes <prefix>-0 … <prefix>-<n-1> as their
// Gateway's controller would, as soon as each appears.
func answerRoutes(ctx context.Context, prefix string, n int) {
	answered := map[string]bool{}
	for len(answered) < n && ctx.Err() == nil {
		for i := range n {
			name := fmt.Sprintf("%s-%d", prefix, i)
			route := &gwapiv1.HTTPRoute{}
			if answered[name] || k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, route) != nil {
				continue
			}
			cond := func(t, reason string) metav1.Condition {
				return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: route.Generation, LastTransitionTime: metav1.Now()}
			}
			route.Status.Parents = []gwapiv1.RouteParentStatus{{
				ParentRef: route.Spec.ParentRefs[0], ControllerName: "example.com/test-gateway",
				Conditions: []metav1.Condition{cond("Accepted", "Accepted"), cond("ResolvedRefs", "ResolvedRefs")},
			}}
			if k8sClient.Status().Update(ctx, route) == nil {
				answered[name] = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
