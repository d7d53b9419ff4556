package controller

import (
	"testing"

	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

// Labels are a claim: a filter is the controller's only where the
// controller writes, Istio's root namespace or the namespace its label
// names.
func TestWritten(t *testing.T) {
	labels := func(ns string) map[string]string {
		return map[string]string{topology.LabelManagedBy: topology.ManagedBy, topology.LabelNamespace: ns}
	}
	for _, tc := range []struct {
		name      string
		namespace string
		labels    map[string]string
		want      bool
	}{
		{"in the root namespace", "istio-system", labels("team-a"), true},
		{"in the namespace its label names", "team-a", labels("team-a"), true},
		{"a tenant's look-alike naming another namespace", "team-b", labels("team-a"), false},
		{"a look-alike naming no namespace", "team-b", map[string]string{topology.LabelManagedBy: topology.ManagedBy}, false},
		{"without the controller's label", "istio-system", map[string]string{topology.LabelNamespace: "team-a"}, false},
		{"another controller's label value", "team-a", map[string]string{topology.LabelManagedBy: "someone", topology.LabelNamespace: "team-a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ef := &networkingv1alpha3.EnvoyFilter{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: "f", Labels: tc.labels}}
			if got := Written(ef, "istio-system"); got != tc.want {
				t.Errorf("Written = %v, want %v", got, tc.want)
			}
		})
	}
}
