package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
)

// The host index must find every APIRule whose hosts overlap: the host
// check and the events between claimants read nothing else, so a missed
// pair would let two APIRules serve the same host.
func TestHostIndexFindsEveryOverlap(t *testing.T) {
	names := []string{
		"a.example.com", "b.example.com", "x.a.example.com", "y.x.a.example.com",
		"*.example.com", "*.a.example.com", "*.x.a.example.com", "*.b.example.com",
		"example.com", "a.example.org", "*.example.org", "badexample.com", "*.com",
	}
	ruleOf := func(host string) *gatewayv1alpha1.APIRule {
		return &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts: []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(host)},
		}}
	}
	for _, a := range names {
		for _, b := range names {
			found := slices.ContainsFunc(overlapKeys(ruleOf(a)), func(k string) bool { return slices.Contains(hostKeys(ruleOf(b)), k) })
			if overlap := hosts.Overlap(a, b); overlap && !found {
				t.Errorf("%s overlaps %s, but the host index does not find it", b, a)
			}
		}
	}
}
