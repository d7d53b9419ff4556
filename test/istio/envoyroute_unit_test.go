package istio

import (
	"testing"
)

// TestAgreeTellsVerdictsApart: the comparison notices each field.
func TestAgreeTellsVerdictsApart(t *testing.T) {
	base := gatewayVerdict{Route: "shop.orders.1", Clusters: []string{"outbound|8080||orders.shop.svc.cluster.local"}, Path: "/x", Headers: []string{"request-remove x-debug"}}
	if !agree(&base, &base) {
		t.Fatal("a verdict disagrees with itself")
	}
	named := base
	named.Route = "shop.orders.1.m0"
	if !agree(&base, &named) {
		t.Fatal("Envoy's name of a named match is its route's")
	}
	for name, change := range map[string]func(*gatewayVerdict){
		"route": func(v *gatewayVerdict) { v.Route = "shop.orders.2" },
		"clusters": func(v *gatewayVerdict) {
			v.Clusters = append([]string{"outbound|9000||reports.analytics.svc.cluster.local"}, v.Clusters...)
		},
		"path":    func(v *gatewayVerdict) { v.Path = "/y" },
		"headers": func(v *gatewayVerdict) { v.Headers = nil },
	} {
		other := base
		change(&other)
		if agree(&base, &other) {
			t.Errorf("a different %s agrees", name)
		}
	}
	if agree(&base, nil) || agree(nil, &base) || !agree(nil, nil) {
		t.Error("a route and no route agree, or no route and no route do not")
	}
}
