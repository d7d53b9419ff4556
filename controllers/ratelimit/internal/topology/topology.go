package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Labels on every EnvoyFilter the ratelimit controller writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ratelimit-controller"
	LabelWorkload  = "gateway.portico.dev/workload"
)

// DefaultRootNamespace is Istio's default root namespace
// (meshConfig.rootNamespace).
const DefaultRootNamespace = "istio-system"

// Gateway is an Istio Gateway: where it lives and which pods it selects.
type Gateway struct {
	Namespace string
	Name      string
	Selector  map[string]string
}

// APIRule is the part of an APIRule the topology needs.
type APIRule struct {
	Namespace string
	Name      string
	// Gateway is the Istio Gateway as <namespace>/<name>.
	Gateway string
	Rules   []gatewayv1alpha1.Rule
}

// Policy is one RateLimit.
type Policy struct {
	Namespace string
	Name      string
	// UID makes the policy an owner of the EnvoyFilters in its namespace.
	UID     types.UID
	Created time.Time
	Spec    gatewayv1alpha1.RateLimitSpec
}

// Pod is a pod a gateway may select: where it runs and its labels. Only
// these two matter because an EnvoyFilter with a workloadSelector reaches
// the matching pods of its own namespace (of every namespace when it lives
// in Istio's root namespace).
type Pod struct {
	Namespace string
	Labels    map[string]string
}

// Input is the state of the world.
type Input struct {
	Gateways []Gateway
	APIRules []APIRule
	Policies []Policy
	// Pods are the pods gateways select; pods no gateway selects may be left
	// out, and pods with the same namespace and labels may be passed once.
	Pods []Pod
	// RootNamespace is Istio's root namespace: an EnvoyFilter there reaches
	// matching pods in every namespace. Empty means there is none.
	RootNamespace string
	// GatewaysKnown and APIRulesKnown are false while the CRD of that kind is
	// not installed, so targets of that kind cannot be resolved.
	GatewaysKnown bool
	APIRulesKnown bool
}

// Verdict is a RateLimit's outcome.
type Verdict struct {
	Reason  string
	Message string
	// EnvoyFilters are the namespace/name of the filters enforcing the limit,
	// sorted: one per namespace the gateway's pods run in.
	EnvoyFilters []string
}

// Enforced reports whether the limit is in an EnvoyFilter.
func (v Verdict) Enforced() bool { return v.Reason == gatewayv1alpha1.ReasonEnforced }

// Output is the desired world.
type Output struct {
	// EnvoyFilters sorted by namespace and name.
	EnvoyFilters []*networkingv1alpha3client.EnvoyFilter
	Verdicts     map[types.NamespacedName]Verdict
}

// podGroup is the pods of one namespace that carry the same labels: a
// gateway selector and an EnvoyFilter reach all of them or none.
type podGroup struct {
	namespace string
	labels    map[string]string
	// gateways that select these pods, as namespace/name.
	gateways []string
}

// workload is the set of pods one EnvoyFilter reaches: the pods matching a
// gateway selector in the filter's namespace (in every namespace when the
// filter lives in the root namespace).
type workload struct {
	namespace string
	selector  map[string]string
	gateways  []string // namespace/name of the gateways with this selector that reach it, sorted
	pods      []int    // pod groups reached, ascending
	claims    []claim
}

func (w *workload) filterName() string { return EnvoyFilterName(w.namespace, w.selector) }
func (w *workload) filterRef() string  { return w.namespace + "/" + w.filterName() }

// gatewayTarget is a gateway and the workloads its selector reaches.
type gatewayTarget struct {
	Gateway
	workloads []*workload // sorted by namespace
}

func (g *gatewayTarget) ref() string { return g.Namespace + "/" + g.Name }

func selectorKey(s map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, k+"="+s[k])
	}
	return strings.Join(parts, ",")
}

// selects reports whether a non-empty selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// WorkloadID is a short stable identifier of a workload, used in names.
func WorkloadID(namespace string, selector map[string]string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + selectorKey(selector)))
	return hex.EncodeToString(sum[:])[:10]
}

// EnvoyFilterName is the name of a workload's EnvoyFilter.
func EnvoyFilterName(namespace string, selector map[string]string) string {
	return "portico-ratelimit-" + WorkloadID(namespace, selector)
}

// HTTPFilterName is the name of the local rate limit HTTP filter a
// workload's EnvoyFilter inserts. It is unique per EnvoyFilter because
// Envoy finds a route's typed_per_filter_config by filter name: two
// EnvoyFilters whose selectors overlap on the same pods insert two filters,
// and with one shared name each would also apply the other's route buckets,
// taking two tokens per request.
func HTTPFilterName(namespace string, selector map[string]string) string {
	return "portico.local_ratelimit." + WorkloadID(namespace, selector)
}

// claim is one rate-limited scope of a workload.
type claim struct {
	policy types.NamespacedName
	route  string // empty for the gateway-wide scope
	spec   gatewayv1alpha1.RateLimitSpec
}

// target is what a policy resolves to: a gateway's workloads, and either the
// whole gateway or the routes of an APIRule.
type target struct {
	gateway     *gatewayTarget
	via         string // "Istio gateway a/b" or "APIRule a/b on Istio gateway c/d"
	gatewayWide bool
	routes      []string
}

// snapshot is the Input indexed for Compute.
type snapshot struct {
	in       Input
	pods     []podGroup
	gateways map[string]*gatewayTarget // by namespace/name
	apiRules map[string]APIRule        // by namespace/name
	// workloads by namespace/selectorKey.
	workloads map[string]*workload
}

func newSnapshot(in Input) *snapshot {
	w := &snapshot{in: in, pods: podGroups(in.Pods), gateways: map[string]*gatewayTarget{}, apiRules: map[string]APIRule{}, workloads: map[string]*workload{}}
	gateways := slices.Clone(in.Gateways)
	slices.SortFunc(gateways, func(a, b Gateway) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	for _, g := range gateways {
		t := &gatewayTarget{Gateway: g}
		w.gateways[t.ref()] = t
		var matched []int
		rooted := false
		for i := range w.pods {
			if len(g.Selector) == 0 {
				// Istio applies a gateway without a selector to every
				// gateway pod; Portico cannot target it, but it shares
				// every pod with the others.
				w.pods[i].gateways = append(w.pods[i].gateways, t.ref())
				continue
			}
			if selects(g.Selector, w.pods[i].labels) {
				matched = append(matched, i)
				w.pods[i].gateways = append(w.pods[i].gateways, t.ref())
				rooted = rooted || w.pods[i].namespace == in.RootNamespace
			}
		}
		// Where the filter must live: with a matching pod in the root
		// namespace, one filter there reaches the pods of every namespace
		// (a second one elsewhere would apply twice); otherwise one filter
		// per namespace the pods run in.
		byNamespace := map[string][]int{}
		for _, i := range matched {
			ns := w.pods[i].namespace
			if rooted {
				ns = in.RootNamespace
			}
			byNamespace[ns] = append(byNamespace[ns], i)
		}
		for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
			key := ns + "/" + selectorKey(g.Selector)
			wl, ok := w.workloads[key]
			if !ok {
				wl = &workload{namespace: ns, selector: g.Selector, pods: byNamespace[ns]}
				w.workloads[key] = wl
			}
			wl.gateways = append(wl.gateways, t.ref())
			t.workloads = append(t.workloads, wl)
		}
	}
	for _, r := range in.APIRules {
		w.apiRules[r.Namespace+"/"+r.Name] = r
	}
	return w
}

// podGroups deduplicates pods by namespace and labels, sorted.
func podGroups(pods []Pod) []podGroup {
	seen := map[string]bool{}
	var groups []podGroup
	for _, p := range pods {
		key := p.Namespace + "/" + selectorKey(p.Labels)
		if seen[key] {
			continue
		}
		seen[key] = true
		groups = append(groups, podGroup{namespace: p.Namespace, labels: p.Labels})
	}
	slices.SortFunc(groups, func(a, b podGroup) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return strings.Compare(selectorKey(a.labels), selectorKey(b.labels))
	})
	return groups
}

// owners records which policy holds each scope of each pod group.
type owners struct {
	gatewayWide map[int]types.NamespacedName    // pod group -> gateway-wide limit
	anyRoute    map[int]types.NamespacedName    // pod group -> oldest route limit
	route       map[string]types.NamespacedName // pod group|route -> route limit
}

// Compute derives the desired EnvoyFilters and verdicts.
func Compute(in Input) Output {
	out := Output{Verdicts: map[types.NamespacedName]Verdict{}}
	w := newSnapshot(in)

	policies := slices.Clone(in.Policies)
	slices.SortStableFunc(policies, func(a, b Policy) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	byID := map[types.NamespacedName]Policy{}
	held := owners{gatewayWide: map[int]types.NamespacedName{}, anyRoute: map[int]types.NamespacedName{}, route: map[string]types.NamespacedName{}}
	for _, p := range policies {
		id := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		byID[id] = p
		t, v := w.resolve(p)
		if v == nil {
			v = w.reach(p, t)
		}
		if v == nil {
			v = held.conflict(w, t)
		}
		if v != nil {
			out.Verdicts[id] = *v
			continue
		}
		held.take(id, t)
		var refs []string
		for _, wl := range t.gateway.workloads {
			if t.gatewayWide {
				wl.claims = append(wl.claims, claim{policy: id, spec: p.Spec})
			}
			for _, r := range t.routes {
				wl.claims = append(wl.claims, claim{policy: id, route: r, spec: p.Spec})
			}
			refs = append(refs, wl.filterRef())
		}
		out.Verdicts[id] = Verdict{
			Reason:       gatewayv1alpha1.ReasonEnforced,
			Message:      fmt.Sprintf("enforced on the pods of %s by EnvoyFilter %s", t.via, strings.Join(refs, ", ")),
			EnvoyFilters: refs,
		}
	}

	for _, wl := range w.workloads {
		if len(wl.claims) > 0 {
			out.EnvoyFilters = append(out.EnvoyFilters, envoyFilter(wl, byID))
		}
	}
	slices.SortFunc(out.EnvoyFilters, func(a, b *networkingv1alpha3client.EnvoyFilter) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

func notFound(format string, args ...any) *Verdict {
	return &Verdict{Reason: gatewayv1alpha1.ReasonTargetNotFound, Message: fmt.Sprintf(format, args...)}
}

func notEnforced(format string, args ...any) *Verdict {
	return &Verdict{Reason: gatewayv1alpha1.ReasonNotEnforced, Message: fmt.Sprintf(format, args...)}
}

// resolve finds a policy's gateway and the routes it limits, or says why
// its target cannot be found.
func (w *snapshot) resolve(p Policy) (target, *Verdict) {
	switch p.Spec.TargetRef.Kind {
	case gatewayv1alpha1.TargetGateway:
		if !w.in.GatewaysKnown {
			return target{}, notFound("Istio's Gateway CRD (gateways.networking.istio.io) is not installed")
		}
		g, ok := w.gateways[p.Namespace+"/"+p.Spec.TargetRef.Name]
		if !ok {
			return target{}, notFound("Istio gateway %s/%s not found", p.Namespace, p.Spec.TargetRef.Name)
		}
		return target{gateway: g, via: "Istio gateway " + g.ref(), gatewayWide: true}, nil
	case gatewayv1alpha1.TargetAPIRule:
		if !w.in.APIRulesKnown {
			return target{}, notFound("the APIRule CRD (apirules.gateway.portico.dev) is not installed")
		}
		rule, ok := w.apiRules[p.Namespace+"/"+p.Spec.TargetRef.Name]
		if !ok {
			return target{}, notFound("APIRule %s/%s not found", p.Namespace, p.Spec.TargetRef.Name)
		}
		if !w.in.GatewaysKnown {
			return target{}, notFound("Istio's Gateway CRD (gateways.networking.istio.io) is not installed")
		}
		g, ok := w.gateways[rule.Gateway]
		if !ok {
			return target{}, notFound("Istio gateway %s of APIRule %s/%s not found", rule.Gateway, rule.Namespace, rule.Name)
		}
		var routes []string
		for _, r := range rule.Rules {
			routes = append(routes, gatewayv1alpha1.RouteName(rule.Namespace, rule.Name, r))
		}
		slices.Sort(routes)
		routes = slices.Compact(routes)
		return target{gateway: g, routes: routes, via: fmt.Sprintf("APIRule %s/%s on Istio gateway %s", rule.Namespace, rule.Name, g.ref())}, nil
	}
	return target{}, notFound("unknown target kind %q", p.Spec.TargetRef.Kind)
}

// reach checks that an EnvoyFilter for the target would limit the policy's
// traffic and only its tenant's: the gateway must select running pods, and
// a gateway-wide limit may not throttle gateways of other namespaces that
// share those pods.
func (w *snapshot) reach(p Policy, t target) *Verdict {
	g := t.gateway
	switch {
	case len(g.Selector) == 0:
		return notEnforced("Istio gateway %s has no selector; Portico only limits gateways that select their pods by label", g.ref())
	case len(g.workloads) == 0:
		return notEnforced("no pod matches the selector %s of Istio gateway %s, so no EnvoyFilter would limit anything; the limit applies once such pods run",
			selectorKey(g.Selector), g.ref())
	case !t.gatewayWide && len(t.routes) == 0:
		return notEnforced("%s has no rules to limit", t.via)
	case !t.gatewayWide:
		return nil // route buckets touch only the APIRule's own routes
	}
	var foreign []string
	for _, wl := range g.workloads {
		for _, i := range wl.pods {
			for _, other := range w.pods[i].gateways {
				if ns, _, _ := strings.Cut(other, "/"); ns != p.Namespace {
					foreign = append(foreign, other)
				}
			}
		}
	}
	if len(foreign) > 0 {
		slices.Sort(foreign)
		return notEnforced("the pods selected by %s (%s) also serve Istio gateway(s) %s of other namespaces; a gateway-wide limit would throttle their traffic too, so it is not applied (limit APIRules' routes instead)",
			g.ref(), selectorKey(g.Selector), strings.Join(slices.Compact(foreign), ", "))
	}
	return nil
}

// conflict finds the older policy holding a scope the target needs, in a
// deterministic order (workloads, then pod groups, then routes).
func (o owners) conflict(w *snapshot, t target) *Verdict {
	conflicted := func(format string, args ...any) *Verdict {
		return &Verdict{Reason: gatewayv1alpha1.ReasonConflicted, Message: fmt.Sprintf(format, args...)}
	}
	for _, wl := range t.gateway.workloads {
		for _, i := range wl.pods {
			where := podsOf(w.pods[i])
			if winner, ok := o.gatewayWide[i]; ok {
				if t.gatewayWide {
					return conflicted("the gateway-wide scope of %s is already limited by the older RateLimit %s; this one is not applied", where, winner)
				}
				return conflicted("%s is already limited gateway-wide by the older RateLimit %s; a route's own bucket would replace that limit for the route in Envoy, so this one is not applied", where, winner)
			}
			if t.gatewayWide {
				if winner, ok := o.anyRoute[i]; ok {
					return conflicted("routes of %s are already limited by the older RateLimit %s; their own buckets would replace a gateway-wide limit in Envoy, so this one is not applied", where, winner)
				}
				continue
			}
			for _, r := range t.routes {
				if winner, ok := o.route[routeScope(i, r)]; ok {
					return conflicted("route %s on %s is already limited by the older RateLimit %s; this one is not applied", r, where, winner)
				}
			}
		}
	}
	return nil
}

// take records the target's scopes as held by id.
func (o owners) take(id types.NamespacedName, t target) {
	for _, wl := range t.gateway.workloads {
		for _, i := range wl.pods {
			if t.gatewayWide {
				o.gatewayWide[i] = id
				continue
			}
			if _, ok := o.anyRoute[i]; !ok {
				o.anyRoute[i] = id
			}
			for _, r := range t.routes {
				o.route[routeScope(i, r)] = id
			}
		}
	}
}

func routeScope(podGroup int, route string) string { return fmt.Sprintf("%d|%s", podGroup, route) }

func podsOf(g podGroup) string {
	return fmt.Sprintf("the pods labelled %s in namespace %s", selectorKey(g.labels), g.namespace)
}

func envoyFilter(w *workload, policies map[types.NamespacedName]Policy) *networkingv1alpha3client.EnvoyFilter {
	var gatewayClaim *claim
	var routeClaims []claim
	contributors := map[types.NamespacedName]bool{}
	for i := range w.claims {
		contributors[w.claims[i].policy] = true
		if w.claims[i].route == "" {
			gatewayClaim = &w.claims[i]
		} else {
			routeClaims = append(routeClaims, w.claims[i])
		}
	}
	slices.SortFunc(routeClaims, func(a, b claim) int { return strings.Compare(a.route, b.route) })

	ef := &networkingv1alpha3client.EnvoyFilter{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.istio.io/v1alpha3", Kind: "EnvoyFilter"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            w.filterName(),
			Namespace:       w.namespace,
			Labels:          map[string]string{LabelManagedBy: ManagedBy, LabelWorkload: WorkloadID(w.namespace, w.selector)},
			OwnerReferences: ownerReferences(w.namespace, contributors, policies),
		},
	}
	name := HTTPFilterName(w.namespace, w.selector)
	// Proto messages must not be copied: fill the object's spec in place.
	spec := &ef.Spec
	spec.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: maps.Clone(w.selector)}
	spec.ConfigPatches = append(spec.ConfigPatches, listenerFilterPatch(name, gatewayClaim))
	if gatewayClaim != nil && len(gatewayClaim.spec.Descriptors) > 0 {
		spec.ConfigPatches = append(spec.ConfigPatches, virtualHostPatch(gatewayClaim))
	}
	for _, c := range routeClaims {
		spec.ConfigPatches = append(spec.ConfigPatches, routePatch(name, c))
	}
	return ef
}

// ownerReferences makes every contributing RateLimit of the filter's
// namespace an owner, so the garbage collector removes the filter once they
// are all gone even when the controller no longer runs. Owners in other
// namespaces are impossible: the garbage collector treats a cross-namespace
// owner as missing and would delete the filter at once.
func ownerReferences(namespace string, contributors map[types.NamespacedName]bool, policies map[types.NamespacedName]Policy) []metav1.OwnerReference {
	var refs []metav1.OwnerReference
	for _, id := range slices.SortedFunc(maps.Keys(contributors), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		if id.Namespace != namespace {
			continue
		}
		refs = append(refs, metav1.OwnerReference{
			APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "RateLimit",
			Name: id.Name, UID: policies[id].UID,
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
		})
	}
	return refs
}
