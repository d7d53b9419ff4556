package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	"github.com/portico-dev/portico/internal/globallimit"
)

// tenantKeyName is the name of every tenant's request; its namespace is
// the tenant's (a RateLimit namespace). World has no namespace, so the two
// never meet, and the fair queue (package fairqueue) serves each tenant's
// key as its own tenant's: a tenant that keeps changing its RateLimits
// gets one turn per round like every other.
const tenantKeyName = "tenant"

// tenantRequest is the key of namespace ns's work.
func tenantRequest(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: tenantKeyName}}
}

// tenant is the work of one RateLimit namespace that a world computed: the
// EnvoyFilters that hold its RateLimits, the RateLimits, its global limits,
// and the world's verdicts. A tenant without any of these (a namespace
// whose last RateLimit went) removes what it still has live.
type tenant struct {
	namespace string
	filters   []*networkingv1alpha3.EnvoyFilter
	limits    []*gatewayv1alpha1.RateLimit
	config    *globallimit.Config
	verdicts  map[types.NamespacedName]topology.Verdict
}

// cost orders the tenants' work: the config patches of their filters and
// their RateLimits.
func (t *tenant) cost() int {
	n := len(t.limits)
	for _, ef := range t.filters {
		n += len(ef.Spec.ConfigPatches)
	}
	return n
}

// tenantsOf splits the work by RateLimit namespace (the namespace label of
// a filter), the cheapest first.
func tenantsOf(filters []*networkingv1alpha3.EnvoyFilter, limits []gatewayv1alpha1.RateLimit, configs []globallimit.Config) []*tenant {
	byNS := map[string]*tenant{}
	get := func(ns string) *tenant {
		if byNS[ns] == nil {
			byNS[ns] = &tenant{namespace: ns}
		}
		return byNS[ns]
	}
	for _, ef := range filters {
		t := get(ef.Labels[topology.LabelNamespace])
		t.filters = append(t.filters, ef)
	}
	for i := range limits {
		t := get(limits[i].Namespace)
		t.limits = append(t.limits, &limits[i])
	}
	for i := range configs {
		get(configs[i].Namespace).config = &configs[i]
	}
	out := slices.Collect(maps.Values(byNS))
	slices.SortFunc(out, func(a, b *tenant) int {
		if c := a.cost() - b.cost(); c != 0 {
			return c
		}
		return strings.Compare(a.namespace, b.namespace)
	})
	return out
}

// tenantWork is the latest world's work, by namespace, and the queue its
// tenants' keys go to.
type tenantWork struct {
	mu       sync.Mutex
	tenants  map[string]*tenant
	queue    workqueue.TypedRateLimitingInterface[reconcile.Request]
	computed bool
}

// publish makes tenants the work of the latest world, and queues each
// tenant's key in their order (the cheapest first). A tenant whose key is
// being worked on is served again after it, with this work.
func (w *tenantWork) publish(tenants []*tenant) {
	byNS := make(map[string]*tenant, len(tenants))
	for _, t := range tenants {
		byNS[t.namespace] = t
	}
	w.mu.Lock()
	w.tenants, w.computed = byNS, true
	q := w.queue
	w.mu.Unlock()
	if q == nil {
		return // no controller runs: its caller writes the work itself
	}
	for _, t := range tenants {
		q.Add(tenantRequest(t.namespace))
	}
}

// of is namespace ns's work in the latest world: nil before the first
// world, and an empty tenant for a namespace that world had no work for
// (its live objects, if any, go).
func (w *tenantWork) of(ns string) *tenant {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.computed {
		return nil
	}
	if t := w.tenants[ns]; t != nil {
		return t
	}
	return &tenant{namespace: ns}
}

// namespaces are the namespaces of the latest world's work.
func (w *tenantWork) namespaces() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.tenants))
}

// source hands the controller's queue to the work, so that a world can
// queue its tenants' keys.
func (w *tenantWork) source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.queue = q
		return nil
	})
}

// liveTenants are the namespaces whose filters (Written) or feed
// ConfigMaps are live, by the label that names them.
func (r *Reconciler) liveTenants(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	var filters networkingv1alpha3.EnvoyFilterList
	if err := r.Client.List(ctx, &filters, ManagedSelector, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list EnvoyFilters: %w", err)
	}
	for _, ef := range filters.Items {
		if Written(ef, r.rootNamespace()) {
			out[ef.Labels[topology.LabelNamespace]] = true
		}
	}
	configs, err := r.liveGlobalConfigs(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, c := range configs {
		if ns := c.Labels[globallimit.LabelNamespace]; ns != "" && r.ownsConfig(c) {
			out[ns] = true
		}
	}
	return out, nil
}

// liveOf are namespace ns's live filters (Written) and feed ConfigMaps,
// by namespace/name and by name.
func (r *Reconciler) liveOf(ctx context.Context, ns string) (map[string]*networkingv1alpha3.EnvoyFilter, map[string]*corev1.ConfigMap, error) {
	var filters networkingv1alpha3.EnvoyFilterList
	if err := r.Client.List(ctx, &filters,
		client.MatchingLabels{topology.LabelManagedBy: topology.ManagedBy, topology.LabelNamespace: ns}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list EnvoyFilters of namespace %s: %w", ns, err)
	}
	live := map[string]*networkingv1alpha3.EnvoyFilter{}
	for _, ef := range filters.Items {
		if Written(ef, r.rootNamespace()) {
			live[ef.Namespace+"/"+ef.Name] = ef
		}
	}
	configs, err := r.liveGlobalConfigs(ctx, ns)
	return live, configs, err
}
