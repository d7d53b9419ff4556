package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func backend(name string, weight int32) gatewayv1alpha1.WeightedBackend {
	return gatewayv1alpha1.WeightedBackend{Service: gatewayv1alpha1.ServiceReference{Name: name, Port: 8080}, Weight: weight}
}

func withBackends(backends ...gatewayv1alpha1.WeightedBackend) func(r *gatewayv1alpha1.APIRule) {
	return func(r *gatewayv1alpha1.APIRule) { r.Spec.Rules[1].Backends = backends }
}

func TestAPIRuleWeightedBackendsValidation(t *testing.T) {
	eight := make([]gatewayv1alpha1.WeightedBackend, 0, 9)
	for i := range 8 {
		eight = append(eight, backend(fmt.Sprintf("v%d", i), 12+int32(i/4))) // 4×12 + 4×13 = 100
	}
	runRuleCases(t, map[string]ruleCase{
		"a 90/10 canary":        {mutate: withBackends(backend("orders", 90), backend("orders-canary", 10))},
		"a drained canary at 0": {mutate: withBackends(backend("orders", 100), backend("orders-canary", 0))},
		"eight backends":        {mutate: withBackends(eight...)},
		"the same Service on two ports": {mutate: withBackends(backend("orders", 50),
			gatewayv1alpha1.WeightedBackend{Service: gatewayv1alpha1.ServiceReference{Name: "orders", Port: 9090}, Weight: 50})},
		"backends of another namespace": {mutate: withBackends(backend("orders", 50),
			gatewayv1alpha1.WeightedBackend{Service: gatewayv1alpha1.ServiceReference{Name: "orders", Namespace: "team-b", Port: 8080}, Weight: 50})},
		"backends and no spec.service": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Service = nil
			r.Spec.Rules[0].Service = &gatewayv1alpha1.ServiceReference{Name: "health", Port: 8080}
			withBackends(backend("orders", 90), backend("orders-canary", 10))(r)
		}},
		"a rule with neither service nor backends, no spec.service": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Service = nil
				withBackends(backend("orders", 90), backend("orders-canary", 10))(r)
			},
			wantErr: "set spec.service, or a service or backends on every rule",
		},
		"service and backends": {
			mutate: func(r *gatewayv1alpha1.APIRule) {
				r.Spec.Rules[1].Service = &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080}
				withBackends(backend("orders", 90), backend("orders-canary", 10))(r)
			},
			wantErr: "set service or backends on a rule, not both",
		},
		"weights adding up to 99": {
			mutate:  withBackends(backend("orders", 90), backend("orders-canary", 9)),
			wantErr: "the weights of a rule's backends are percentages of its requests and must add up to 100",
		},
		"weights adding up to 101": {
			mutate:  withBackends(backend("orders", 90), backend("orders-canary", 11)),
			wantErr: "must add up to 100",
		},
		"every weight 0": {
			mutate:  withBackends(backend("orders", 0), backend("orders-canary", 0)),
			wantErr: "must add up to 100",
		},
		"a negative weight": {
			mutate:  withBackends(backend("orders", 110), backend("orders-canary", -10)),
			wantErr: "should be greater than or equal to 0",
		},
		"a weight above 100": {
			mutate:  withBackends(backend("orders", 101), backend("orders-canary", 0)),
			wantErr: "should be less than or equal to 100",
		},
		"one backend": {
			mutate:  withBackends(backend("orders", 100)),
			wantErr: "should have at least 2 items",
		},
		"nine backends": {
			mutate:  withBackends(append(eight, backend("v8", 0))...),
			wantErr: "must have at most 8 items",
		},
		"a backend twice": {
			mutate:  withBackends(backend("orders", 50), backend("orders", 50)),
			wantErr: "a rule lists a backend (service, namespace and port) twice",
		},
		"a backend without a port": {
			mutate: withBackends(backend("orders", 50),
				gatewayv1alpha1.WeightedBackend{Service: gatewayv1alpha1.ServiceReference{Name: "orders-canary"}, Weight: 50}),
			wantErr: "should be greater than or equal to 1",
		},
		"a backend with an invalid name": {
			mutate:  withBackends(backend("orders", 50), backend("Orders_Canary", 50)),
			wantErr: "should match",
		},
		// The API server leaves prefix rules with backends to the controller
		// (reason InvalidRule): a noAuth prefix over a jwt path is admitted.
		"a noAuth prefix with backends over a jwt path": {mutate: func(r *gatewayv1alpha1.APIRule) {
			r.Spec.Rules[0] = gatewayv1alpha1.Rule{Path: "/*", NoAuth: r.Spec.Rules[0].NoAuth,
				Backends: []gatewayv1alpha1.WeightedBackend{backend("orders", 90), backend("orders-canary", 10)}}
		}},
	})
}

// kubectl explain documents weighted backends: their shares, bounds and
// checks.
func TestKubectlExplainDocumentsWeightedBackends(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.rules.backends":         {"percentage", "adding up to 100", "exclusive with service", "BackendNotPermitted", "ReferenceNotPermitted", "ReferenceGrant", "refuses the whole APIRule", "even at weight 0"},
		"apirules.spec.rules.backends.weight":  {"from 0 to 100", "add up to 100", "drained"},
		"apirules.spec.rules.backends.service": {"BackendNotPermitted", "consent", "refuses the whole APIRule"},
	} {
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			out = strings.Join(strings.Fields(out), " ") // explain wraps lines
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
