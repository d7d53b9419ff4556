package tenancy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// labelManagedBy marks the EnvoyFilters of the ratelimit controller.
const labelManagedBy = "app.kubernetes.io/managed-by"

// limitOf returns a RateLimit and its Ready condition once the controller
// has written it for the current generation.
func limitOf(g Gomega, key client.ObjectKey) (*gatewayv1alpha1.RateLimit, *metav1.Condition) {
	l := &gatewayv1alpha1.RateLimit{}
	g.Expect(admin.Get(context.Background(), key, l)).To(Succeed())
	c := meta.FindStatusCondition(l.Status.Conditions, gatewayv1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil(), "RateLimit %s has no Ready condition yet", key)
	g.Expect(c.ObservedGeneration).To(Equal(l.Generation), "RateLimit %s: status of an older generation", key)
	return l, c
}

// managedFilters lists every EnvoyFilter the ratelimit controller wrote.
func managedFilters(g Gomega) []*networkingv1alpha3.EnvoyFilter {
	var list networkingv1alpha3.EnvoyFilterList
	g.Expect(admin.List(context.Background(), &list, client.MatchingLabels{labelManagedBy: "ratelimit-controller"})).To(Succeed())
	return list.Items
}

// buckets reads the token buckets of an EnvoyFilter: max_tokens by route
// name, "" for the gateway-wide bucket.
func buckets(g Gomega, ef *networkingv1alpha3.EnvoyFilter) map[string]float64 {
	raw, err := json.Marshal(&ef.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	var spec struct {
		ConfigPatches []map[string]any `json:"configPatches"`
	}
	g.Expect(json.Unmarshal(raw, &spec)).To(Succeed())
	out := map[string]float64{}
	for _, p := range spec.ConfigPatches {
		value := dig(p, "patch", "value")
		switch dig(p, "applyTo") {
		case "HTTP_FILTER":
			if max, ok := dig(value, "typed_config", "value", "token_bucket", "max_tokens").(float64); ok {
				out[""] = max
			}
		case "HTTP_ROUTE":
			route, _ := dig(p, "match", "routeConfiguration", "vhost", "route", "name").(string)
			perFilter, _ := dig(value, "typed_per_filter_config").(map[string]any)
			for _, cfg := range perFilter {
				if max, ok := dig(cfg, "value", "token_bucket", "max_tokens").(float64); ok {
					out[route] = max
				}
			}
		}
	}
	return out
}

func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// contributors are the namespaces whose RateLimits an EnvoyFilter holds:
// those naming it in their status, owning it, or whose APIRule routes it
// limits (route names start with the APIRule's namespace).
func contributors(g Gomega, ef *networkingv1alpha3.EnvoyFilter, limits []gatewayv1alpha1.RateLimit) []string {
	var nss []string
	for _, l := range limits {
		if slices.Contains(l.Status.EnvoyFilters, ef.Namespace+"/"+ef.Name) {
			nss = append(nss, l.Namespace)
		}
	}
	for _, ref := range ef.OwnerReferences {
		if ref.Kind == "RateLimit" {
			nss = append(nss, ef.Namespace)
		}
	}
	for route := range buckets(g, ef) {
		if ns, _, ok := strings.Cut(route, "."); ok {
			nss = append(nss, ns)
		}
	}
	slices.Sort(nss)
	return slices.Compact(nss)
}

// expectFiltersIsolated checks the isolation of every EnvoyFilter: it holds
// the claims of one tenant namespace, and lives in that namespace or in
// Istio's root namespace.
func expectFiltersIsolated(g Gomega) {
	var limits gatewayv1alpha1.RateLimitList
	g.Expect(admin.List(context.Background(), &limits)).To(Succeed())
	for _, ef := range managedFilters(g) {
		nss := contributors(g, ef, limits.Items)
		g.Expect(len(nss)).To(BeNumerically("<=", 1), "EnvoyFilter %s/%s holds the limits of namespaces %v", ef.Namespace, ef.Name, nss)
		if len(nss) == 1 {
			g.Expect(ef.Namespace).To(BeElementOf(nss[0], rootNamespace), "EnvoyFilter %s/%s holds the limits of namespace %s", ef.Namespace, ef.Name, nss[0])
		}
	}
}
