package controller

import (
	"slices"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
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
	ruleOf := func(host string) *porticov1alpha1.APIRule {
		return &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: porticov1alpha1.APIRuleSpec{
			Hosts: []porticov1alpha1.Hostname{porticov1alpha1.Hostname(host)},
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

// The owner index keys an object by its APIRule's namespace and name: the
// objects of shop/api are found for shop/api and never for team-b/api, so a
// name many tenants use costs each reconcile only its own objects; objects
// without Portico's labels are not indexed at all.
func TestOwnerIndexKeysByNamespaceAndName(t *testing.T) {
	labelledIn := func(ns string, labels map[string]string) *networkingv1.VirtualService {
		return &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vs", Labels: labels}}
	}
	labelled := func(labels map[string]string) *networkingv1.VirtualService { return labelledIn("shop", labels) }
	tests := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{name: "Portico's labels", want: []string{"shop/api"},
			labels: map[string]string{plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "api", plan.LabelAPIRuleNamespace: "shop"}},
		{name: "another manager", want: nil,
			labels: map[string]string{plan.LabelManagedBy: "helm", plan.LabelAPIRule: "api", plan.LabelAPIRuleNamespace: "shop"}},
		{name: "no APIRule namespace", want: nil,
			labels: map[string]string{plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "api"}},
		{name: "no labels", want: nil},
	}
	// Another namespace's object naming shop/api is a look-alike, never
	// its: not indexed for it.
	if got := ownerKey(labelledIn("backends", map[string]string{plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "api", plan.LabelAPIRuleNamespace: "shop"})); got != nil {
		t.Errorf("ownerKey of a look-alike in another namespace = %q, want none", got)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownerKey(labelled(tt.labels)); !slices.Equal(got, tt.want) {
				t.Errorf("ownerKey = %q, want %q", got, tt.want)
			}
		})
	}
	shop := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"}}
	teamB := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "api"}}
	key := ownerKey(labelled(map[string]string{plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "api", plan.LabelAPIRuleNamespace: "shop"}))
	if !slices.Contains(key, ownedBy(shop)) || slices.Contains(key, ownedBy(teamB)) {
		t.Errorf("the objects of shop/api (key %q) must be found for shop/api (%q) only, not team-b/api (%q)", key, ownedBy(shop), ownedBy(teamB))
	}
}
