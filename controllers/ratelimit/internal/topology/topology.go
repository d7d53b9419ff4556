package topology

import (
	"cmp"
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
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/globallimit"
)

// Labels on every EnvoyFilter the ratelimit controller writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ratelimit-controller"
	LabelWorkload  = "gateway.portico.dev/workload"
	// LabelNamespace names the one namespace whose RateLimits the filter
	// enforces (it differs from the filter's own namespace when the filter
	// lives in Istio's root namespace).
	LabelNamespace = "gateway.portico.dev/ratelimit-namespace"
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

// GatewayAPIGateway is a Gateway API Gateway: where it lives and the ports
// of its HTTP and HTTPS listeners. Istio runs its pods in its namespace,
// labelled gatewayv1alpha1.GatewayNameLabel with its name.
type GatewayAPIGateway struct {
	Namespace string
	Name      string
	// Ports are the ports of its HTTP and HTTPS listeners: Istio names the
	// virtual hosts of a gateway's routes <host>:<listener port>.
	Ports []int32
}

// Selector is the workload selector of the Gateway's pods.
func (g GatewayAPIGateway) Selector() map[string]string {
	return map[string]string{gatewayv1alpha1.GatewayNameLabel: g.Name}
}

// APIRule is the part of an APIRule the topology needs.
type APIRule struct {
	Namespace string
	Name      string
	// Gateway is the Istio Gateway as <namespace>/<name>; empty in HTTPRoute
	// mode.
	Gateway string
	// ParentRef is the Gateway API Gateway of an APIRule in HTTPRoute mode
	// (spec.parentRef, its namespace defaulted), nil otherwise.
	ParentRef *types.NamespacedName
	// Hosts of the APIRule: in HTTPRoute mode its route limits are bound to
	// their virtual hosts.
	Hosts []string
	Rules []gatewayv1alpha1.Rule
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
	Gateways           []Gateway
	GatewayAPIGateways []GatewayAPIGateway
	// APIRules need only be those a policy targets (TargetsAPIRule): no
	// other APIRule changes the output.
	APIRules []APIRule
	Policies []Policy
	// Pods are the pods gateways select; pods no gateway selects may be left
	// out, and pods with the same namespace and labels may be passed once.
	Pods []Pod
	// RootNamespace is Istio's root namespace: an EnvoyFilter there reaches
	// matching pods in every namespace. Empty means there is none.
	RootNamespace string
	// GatewaysKnown, GatewayAPIGatewaysKnown and APIRulesKnown are false
	// while the CRD of that kind is not installed, so targets of that kind
	// cannot be resolved.
	GatewaysKnown           bool
	GatewayAPIGatewaysKnown bool
	APIRulesKnown           bool
	// Global is the administrator's global rate limiting; nil while it is
	// not enabled, and RateLimits with global rules are then not enforced.
	Global *Global
}

// Verdict is a RateLimit's outcome.
type Verdict struct {
	Reason  string
	Message string
	// EnvoyFilters are the namespace/name of the filters enforcing the limit:
	// the one filter of its namespace on the gateway's workload.
	EnvoyFilters []string
}

// Enforced reports whether the limit is in an EnvoyFilter.
func (v Verdict) Enforced() bool { return v.Reason == gatewayv1alpha1.ReasonEnforced }

// Accepted reports whether the target accepts the limit (GEP-713's
// Accepted condition): it was found, is valid and no older limit holds its
// scope, whether or not an EnvoyFilter enforces it.
func (v Verdict) Accepted() bool {
	return v.Reason == gatewayv1alpha1.ReasonEnforced || v.Reason == gatewayv1alpha1.ReasonNotEnforced
}

// Output is the desired world.
type Output struct {
	// EnvoyFilters sorted by namespace and name.
	EnvoyFilters []*networkingv1alpha3client.EnvoyFilter
	Verdicts     map[types.NamespacedName]Verdict
	// GlobalConfigs are the rate-limit service's limits, one Config per
	// namespace with enforced global rules, sorted by namespace.
	GlobalConfigs []globallimit.Config
}

// podGroup is the pods of one namespace that carry the same labels: a
// gateway selector and an EnvoyFilter reach all of them or none.
type podGroup struct {
	namespace string
	labels    map[string]string
}

// workload is one EnvoyFilter: the pods a gateway selector matches, and
// the claims on them of the RateLimits of one namespace, the tenant.
type workload struct {
	// namespace the filter lives in: the tenant's own when every pod runs
	// there, else Istio's root namespace.
	namespace string
	tenant    string
	selector  map[string]string
	claims    []claim
}

func (w *workload) id() string         { return WorkloadID(w.namespace, w.tenant, w.selector) }
func (w *workload) filterName() string { return EnvoyFilterName(w.namespace, w.tenant, w.selector) }
func (w *workload) filterRef() string  { return w.namespace + "/" + w.filterName() }

// gatewayTarget is a gateway and the pods its selector matches.
type gatewayTarget struct {
	Gateway
	// gatewayAPI marks a Gateway API Gateway, whose selector is Istio's
	// gateway-name label.
	gatewayAPI bool
	ports      []int32 // a Gateway API Gateway's HTTP(S) listener ports
	// pods are the pod groups the gateway's limits act on, ascending: for an
	// Istio Gateway every pod its selector matches, in every namespace; for
	// a Gateway API Gateway those of its own namespace, where Istio runs
	// them (the label names the Gateway, not its namespace).
	pods []int
	// reach is every pod group the selector matches, in every namespace:
	// what a filter with it reaches from Istio's root namespace.
	reach []int
}

func (g *gatewayTarget) ref() string { return g.Namespace + "/" + g.Name }

// String names the gateway in messages.
func (g *gatewayTarget) String() string {
	if g.gatewayAPI {
		return "Gateway API gateway " + g.ref()
	}
	return "Istio gateway " + g.ref()
}

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

// WorkloadID is a short stable identifier of one EnvoyFilter: the
// namespace it lives in, the namespace whose RateLimits it enforces and the
// workload selector.
func WorkloadID(namespace, tenant string, selector map[string]string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + tenant + "/" + selectorKey(selector)))
	return hex.EncodeToString(sum[:])[:10]
}

// EnvoyFilterName is the name of the EnvoyFilter, in namespace, that
// enforces the RateLimits of namespace tenant on the pods selector matches.
func EnvoyFilterName(namespace, tenant string, selector map[string]string) string {
	return "portico-ratelimit-" + WorkloadID(namespace, tenant, selector)
}

// HTTPFilterName is the name of the local rate limit HTTP filter that the
// EnvoyFilter of EnvoyFilterName(namespace, tenant, selector) inserts. It is
// unique per EnvoyFilter because Envoy finds a route's
// typed_per_filter_config by filter name: the filters of two tenants (or of
// two overlapping selectors) on the same pods insert two HTTP filters, and
// with one shared name each would also apply the other's route buckets,
// taking two tokens per request.
func HTTPFilterName(namespace, tenant string, selector map[string]string) string {
	return "portico.local_ratelimit." + WorkloadID(namespace, tenant, selector)
}

// route is one Envoy route a claim limits: its name and, when the name is
// not unique on the gateway, the virtual host it is in.
type route struct {
	// name of the Envoy route: RouteName for an APIRule's VirtualService,
	// the HTTPRoute rule's name (HTTPRouteRuleName) in HTTPRoute mode.
	name string
	// vhost is the virtual host, <host>:<port>, or empty for any. Istio
	// names an HTTPRoute rule's Envoy routes by the rule name alone, which
	// other HTTPRoutes on the gateway may use too, so in HTTPRoute mode a
	// limit is bound to the APIRule's own virtual hosts.
	vhost string
}

func (r route) key() string { return r.vhost + "|" + r.name }

func (r route) String() string {
	if r.vhost == "" {
		return r.name
	}
	return r.name + " (virtual host " + r.vhost + ")"
}

// claim is one rate-limited scope of a workload.
type claim struct {
	policy types.NamespacedName
	route  route // zero for the gateway-wide scope
	spec   gatewayv1alpha1.RateLimitSpec
}

// target is what a policy resolves to: a gateway's pods, and either the
// whole gateway or the routes of an APIRule.
type target struct {
	gateway     *gatewayTarget
	via         string // "Istio gateway a/b" or "APIRule a/b on Istio gateway c/d"
	gatewayWide bool
	routes      []route
}

// snapshot is the Input indexed for Compute.
type snapshot struct {
	in          Input
	pods        []podGroup
	gateways    map[string]*gatewayTarget // Istio Gateways by namespace/name
	gatewayAPIs map[string]*gatewayTarget // Gateway API Gateways by namespace/name
	apiRules    map[string]APIRule        // by namespace/name
	// workloads by namespace/tenant/selectorKey.
	workloads map[string]*workload
}

func newSnapshot(in Input) *snapshot {
	w := &snapshot{in: in, pods: podGroups(in.Pods), gateways: map[string]*gatewayTarget{}, gatewayAPIs: map[string]*gatewayTarget{},
		apiRules: map[string]APIRule{}, workloads: map[string]*workload{}}
	for _, g := range in.Gateways {
		t := &gatewayTarget{Gateway: g}
		t.reach = w.selected(g.Selector)
		t.pods = t.reach
		w.gateways[t.ref()] = t
	}
	for _, g := range in.GatewayAPIGateways {
		t := &gatewayTarget{Gateway: Gateway{Namespace: g.Namespace, Name: g.Name, Selector: g.Selector()}, gatewayAPI: true, ports: g.Ports}
		t.reach = w.selected(t.Selector)
		for _, i := range t.reach {
			if w.pods[i].namespace == g.Namespace {
				t.pods = append(t.pods, i)
			}
		}
		w.gatewayAPIs[t.ref()] = t
	}
	for _, r := range in.APIRules {
		w.apiRules[r.Namespace+"/"+r.Name] = r
	}
	return w
}

// selected returns the pod groups a selector matches, ascending.
func (w *snapshot) selected(selector map[string]string) []int {
	var out []int
	for i := range w.pods {
		if selects(selector, w.pods[i].labels) {
			out = append(out, i)
		}
	}
	return out
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

// actsOn returns the pod groups a limit of namespace acts on: for a
// gateway-wide limit, the selected pods of its own namespace (none in
// Istio's root namespace unless every selected pod runs there, as a filter
// there reaches the pods of every namespace); for route limits every pod
// the gateway selects.
func (w *snapshot) actsOn(t target, namespace string) []int {
	if !t.gatewayWide {
		return t.gateway.pods
	}
	if namespace == w.in.RootNamespace {
		// A filter there reaches the look-alike pods of every namespace too.
		if !w.allRunIn(t.gateway.reach, namespace) {
			return nil
		}
		return t.gateway.pods
	}
	var own []int
	for _, i := range t.gateway.pods {
		if w.pods[i].namespace == namespace {
			own = append(own, i)
		}
	}
	return own
}

// runsIn reports whether every pod of the gateway runs in namespace.
func (w *snapshot) runsIn(g *gatewayTarget, namespace string) bool {
	return w.allRunIn(g.pods, namespace)
}

// allRunIn reports whether every pod group of pods runs in namespace.
func (w *snapshot) allRunIn(pods []int, namespace string) bool {
	for _, i := range pods {
		if w.pods[i].namespace != namespace {
			return false
		}
	}
	return true
}

// home is the namespace of the EnvoyFilter that enforces the RateLimits of
// tenant on the pods g selects: the tenant's own namespace when every one of
// them runs there, else Istio's root namespace, whose workloadSelector
// reaches the pods of every namespace (a filter beside the pods would be
// written into another tenant's namespace). Empty when there is no root
// namespace.
func (w *snapshot) home(tenant string, g *gatewayTarget) string {
	if w.runsIn(g, tenant) {
		return tenant
	}
	return w.in.RootNamespace
}

// workload returns the EnvoyFilter for the RateLimits of tenant on the pods
// g selects; gateways with the same selector share it.
func (w *snapshot) workload(tenant string, g *gatewayTarget) *workload {
	return w.workloadIn(w.home(tenant, g), tenant, g)
}

// workloadIn returns the EnvoyFilter in namespace ns for the RateLimits of
// tenant on the pods g selects.
func (w *snapshot) workloadIn(ns, tenant string, g *gatewayTarget) *workload {
	key := ns + "/" + tenant + "/" + selectorKey(g.Selector)
	wl, ok := w.workloads[key]
	if !ok {
		wl = &workload{namespace: ns, tenant: tenant, selector: g.Selector}
		w.workloads[key] = wl
	}
	return wl
}

// visit is a policy whose target resolved to running pods, about to claim
// its scopes.
type visit struct {
	id     types.NamespacedName
	spec   gatewayv1alpha1.RateLimitSpec
	target target
	// foreign marks a route limit on pods that do not all run in its own
	// namespace: it claims after every other limit.
	foreign bool
	// pods are the pod groups the limit acts on: for a gateway-wide limit
	// those of its own namespace (the filter there reaches no others), for
	// route limits every pod the gateway selects.
	pods []int
}

// Compute derives the desired EnvoyFilters and verdicts.
//
// Policies claim their scopes in two passes, each oldest first: first the
// limits on pods of their own namespace (every gateway-wide limit, and route
// limits whose gateway pods all run in the policy's namespace), then route
// limits on pods of other namespaces. So the namespace where the pods run
// decides about them first, and no other tenant's route limit, however old,
// can displace its gateway-wide limit.
func Compute(in Input) Output {
	out := Output{Verdicts: map[types.NamespacedName]Verdict{}}
	w := newSnapshot(in)
	byID := map[types.NamespacedName]Policy{}
	var visits []visit
	for _, p := range byAge(in.Policies) {
		id := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		byID[id] = p
		t, v := w.resolve(p)
		if v == nil {
			v = w.reach(p, t)
		}
		if v == nil && p.Spec.Global != nil && (in.Global == nil || len(in.Global.Key) == 0) {
			v = notEnforced("global rate limits are not enabled: the administrator has not configured spec.rateLimits.global in the APIGateway (Portico's rate-limit service and its Redis), so the global rules cannot be kept; the RateLimit applies once they are")
		}
		if v != nil {
			out.Verdicts[id] = *v
			continue
		}
		visits = append(visits, visit{id: id, spec: p.Spec, target: t, foreign: !t.gatewayWide && !w.runsIn(t.gateway, p.Namespace),
			pods: w.actsOn(t, p.Namespace)})
	}
	pass := func(v visit) int {
		if v.foreign {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(visits, func(a, b visit) int { return cmp.Compare(pass(a), pass(b)) })
	held := owners{gatewayWide: map[int]holder{}, anyRoute: map[int]holder{}, route: map[string]holder{}}
	configs := map[string]*globallimit.Config{}
	for _, v := range visits {
		verdict := w.claim(held, v)
		out.Verdicts[v.id] = verdict
		if verdict.Enforced() && v.spec.Global != nil {
			c, ok := configs[v.id.Namespace]
			if !ok {
				c = &globallimit.Config{Namespace: v.id.Namespace}
				configs[v.id.Namespace] = c
			}
			c.Limits = append(c.Limits, limitsOf(v.id.Name, v.spec)...)
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(configs)) {
		c := configs[ns]
		slices.SortFunc(c.Limits, func(a, b globallimit.Limit) int { return strings.Compare(a.ID, b.ID) })
		out.GlobalConfigs = append(out.GlobalConfigs, *c)
	}

	for _, wl := range w.workloads {
		if len(wl.claims) > 0 {
			out.EnvoyFilters = append(out.EnvoyFilters, envoyFilter(wl, byID, in.Global))
		}
	}
	slices.SortFunc(out.EnvoyFilters, func(a, b *networkingv1alpha3client.EnvoyFilter) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// byAge sorts policies by creation time, then namespace and name.
func byAge(policies []Policy) []Policy {
	sorted := slices.Clone(policies)
	slices.SortStableFunc(sorted, func(a, b Policy) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return sorted
}

// claim gives the visit's scopes to its policy unless another policy holds
// one of them already, and returns the policy's verdict.
func (w *snapshot) claim(held owners, v visit) Verdict {
	if c := held.conflict(w, v); c != nil {
		return *c
	}
	held.take(v)
	wl := w.workload(v.id.Namespace, v.target.gateway)
	if v.target.gatewayWide {
		// In the policy's own namespace, whatever pods of others the gateway
		// also selects: they are not limited, and cannot stop the limit.
		wl = w.workloadIn(v.id.Namespace, v.id.Namespace, v.target.gateway)
	}
	if v.target.gatewayWide {
		wl.claims = append(wl.claims, claim{policy: v.id, spec: v.spec})
	}
	for _, r := range v.target.routes {
		wl.claims = append(wl.claims, claim{policy: v.id, route: r, spec: v.spec})
	}
	return Verdict{
		Reason:       gatewayv1alpha1.ReasonEnforced,
		Message:      fmt.Sprintf("enforced on the pods of %s by EnvoyFilter %s", v.target.via, wl.filterRef()),
		EnvoyFilters: []string{wl.filterRef()},
	}
}

func notFound(format string, args ...any) *Verdict {
	return verdict(gatewayv1alpha1.ReasonTargetNotFound, format, args...)
}

func notEnforced(format string, args ...any) *Verdict {
	return verdict(gatewayv1alpha1.ReasonNotEnforced, format, args...)
}

func verdict(reason, format string, args ...any) *Verdict {
	return &Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// resolve finds a policy's gateway and the routes it limits, or says why
// its target cannot be found.
func (w *snapshot) resolve(p Policy) (target, *Verdict) {
	ref := p.Spec.TargetRef
	switch {
	case ref.IsIstioGateway():
		g, v := w.gateway(p.Namespace+"/"+ref.Name, "")
		if v != nil {
			return target{}, v
		}
		return target{gateway: g, via: g.String(), gatewayWide: true}, nil
	case ref.IsGatewayAPIGateway():
		if len(ref.Name) > maxLabelValue {
			return target{}, verdict(gatewayv1alpha1.ReasonInvalid, "the Gateway API gateway's name %q is longer than %d characters, so Istio cannot label its pods with it (%s)",
				ref.Name, maxLabelValue, gatewayv1alpha1.GatewayNameLabel)
		}
		g, v := w.gatewayAPI(p.Namespace+"/"+ref.Name, "")
		if v != nil {
			return target{}, v
		}
		return target{gateway: g, via: g.String(), gatewayWide: true}, nil
	case TargetsAPIRule(ref):
		return w.resolveAPIRule(p)
	}
	return target{}, verdict(gatewayv1alpha1.ReasonInvalid, "unknown target: kind %q of group %q", ref.Kind, ref.Group)
}

// TargetsAPIRule reports whether a RateLimit's target is an APIRule (of
// the RateLimit's namespace, named ref.Name): the only APIRules Compute
// reads.
func TargetsAPIRule(ref gatewayv1alpha1.TargetReference) bool {
	return ref.Kind == gatewayv1alpha1.TargetAPIRule && (ref.Group == "" || ref.Group == gatewayv1alpha1.PorticoGatewayGroup)
}

// maxLabelValue is the longest label value Kubernetes accepts.
const maxLabelValue = 63

// resolveAPIRule finds the gateway of the APIRule a policy targets and the
// Envoy routes of its rules there.
func (w *snapshot) resolveAPIRule(p Policy) (target, *Verdict) {
	if !w.in.APIRulesKnown {
		return target{}, notFound("the APIRule CRD (%s) is not installed", contract.APIRules.Name)
	}
	rule, ok := w.apiRules[p.Namespace+"/"+p.Spec.TargetRef.Name]
	if !ok {
		return target{}, notFound("APIRule %s/%s not found", p.Namespace, p.Spec.TargetRef.Name)
	}
	of := fmt.Sprintf(" of APIRule %s/%s", rule.Namespace, rule.Name)
	if rule.ParentRef != nil {
		g, v := w.gatewayAPI(rule.ParentRef.String(), of)
		if v != nil {
			return target{}, v
		}
		return target{gateway: g, routes: httpRouteRoutes(rule, g.ports), via: fmt.Sprintf("APIRule %s/%s on %s", rule.Namespace, rule.Name, g)}, nil
	}
	g, v := w.gateway(rule.Gateway, of)
	if v != nil {
		return target{}, v
	}
	var routes []route
	for _, r := range rule.Rules {
		routes = append(routes, route{name: gatewayv1alpha1.RouteName(rule.Namespace, rule.Name, r)})
	}
	return target{gateway: g, routes: sortedRoutes(routes), via: fmt.Sprintf("APIRule %s/%s on %s", rule.Namespace, rule.Name, g)}, nil
}

// httpRouteRoutes are the Envoy routes of an APIRule in HTTPRoute mode on
// a gateway with listeners on ports: one per rule, host and port. Istio
// (1.24 and later) names the Envoy routes of a named HTTPRoute rule by the
// rule's name alone, the same for every HTTPRoute whose rule has the same
// path and methods, so each is bound to the virtual host <host>:<port> that
// Istio builds for the APIRule's host on that listener; a host has one owner
// (the apirule controller's host rules), so those virtual hosts hold this
// APIRule's routes.
func httpRouteRoutes(rule APIRule, ports []int32) []route {
	var routes []route
	for _, host := range rule.Hosts {
		for _, port := range ports {
			for _, r := range rule.Rules {
				routes = append(routes, route{name: gatewayv1alpha1.HTTPRouteRuleName(rule.Namespace, rule.Name, r), vhost: fmt.Sprintf("%s:%d", host, port)})
			}
		}
	}
	return sortedRoutes(routes)
}

func sortedRoutes(routes []route) []route {
	slices.SortFunc(routes, compareRoutes)
	return slices.Compact(routes)
}

func compareRoutes(a, b route) int {
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return strings.Compare(a.vhost, b.vhost)
}

// gateway looks up an Istio gateway by namespace/name; of says, for the
// message, whose gateway it is.
func (w *snapshot) gateway(key, of string) (*gatewayTarget, *Verdict) {
	if !w.in.GatewaysKnown {
		return nil, notFound("Istio's Gateway CRD (%s) is not installed", contract.IstioGateways.Name)
	}
	g, ok := w.gateways[key]
	if !ok {
		return nil, notFound("Istio gateway %s%s not found", key, of)
	}
	return g, nil
}

// gatewayAPI looks up a Gateway API gateway by namespace/name; of says, for
// the message, whose gateway it is.
func (w *snapshot) gatewayAPI(key, of string) (*gatewayTarget, *Verdict) {
	if !w.in.GatewayAPIGatewaysKnown {
		return nil, notFound("the Gateway API's Gateway CRD (%s) is not installed", contract.GatewayAPIGateways.Name)
	}
	g, ok := w.gatewayAPIs[key]
	if !ok {
		return nil, notFound("Gateway API gateway %s%s not found", key, of)
	}
	return g, nil
}

// reach checks that an EnvoyFilter for the target would limit the policy's
// traffic, and only where its tenant may: the gateway must select running
// pods, a gateway-wide limit throttles only pods of the policy's own
// namespace (whoever else's gateways select them), and route limits on pods
// of other namespaces need Istio's root namespace to be written from.
func (w *snapshot) reach(p Policy, t target) *Verdict {
	g := t.gateway
	switch {
	case len(g.Selector) == 0:
		return notEnforced("%s has no selector; Portico only limits gateways that select their pods by label", g)
	case len(g.pods) == 0 && g.gatewayAPI:
		return notEnforced("no pod labelled %s runs in namespace %s, where Istio runs the pods of %s (it runs none for a Gateway of another implementation, or one given an existing address), so no EnvoyFilter would limit anything; the limit applies once such pods run",
			selectorKey(g.Selector), g.Namespace, g)
	case len(g.pods) == 0:
		return notEnforced("no pod matches the selector %s of %s, so no EnvoyFilter would limit anything; the limit applies once such pods run",
			selectorKey(g.Selector), g)
	case !t.gatewayWide && g.gatewayAPI && len(g.ports) == 0:
		return notEnforced("%s has no HTTP or HTTPS listener, so %s has no routes there to limit", g, t.via)
	case !t.gatewayWide && len(t.routes) == 0:
		return notEnforced("%s has no rules to limit", t.via)
	case t.gatewayWide && p.Namespace == w.in.RootNamespace && !w.allRunIn(g.reach, p.Namespace):
		return notEnforced("pods of other namespaces also match the selector %s of %s, and a gateway-wide limit in Istio's root namespace %s would throttle them too, so it is not applied",
			selectorKey(g.Selector), g, p.Namespace)
	case t.gatewayWide && len(w.actsOn(t, p.Namespace)) == 0:
		return notEnforced("no pod that %s selects (%s) runs in namespace %s; a gateway-wide limit throttles every request through its pods, so it applies only to pods of the RateLimit's own namespace (limit APIRules' routes instead)",
			g, selectorKey(g.Selector), p.Namespace)
	case w.home(p.Namespace, g) == "":
		return notEnforced("the pods of %s do not all run in namespace %s, and without Istio's root namespace no EnvoyFilter of this namespace can reach them", t.via, p.Namespace)
	}
	return nil
}

// holder is the policy holding a scope, and whether it claimed in the
// second pass (a route limit on pods of other namespaces).
type holder struct {
	id      types.NamespacedName
	foreign bool
}

// owners records which policy holds each scope of each pod group.
type owners struct {
	gatewayWide map[int]holder    // pod group -> gateway-wide limit
	anyRoute    map[int]holder    // pod group -> first route limit
	route       map[string]holder // pod group|vhost|route -> route limit
}

// conflict finds the policy holding a scope the visit needs, in a
// deterministic order (pod groups, then routes).
func (o owners) conflict(w *snapshot, v visit) *Verdict {
	conflicted := func(format string, args ...any) *Verdict {
		return &Verdict{Reason: gatewayv1alpha1.ReasonConflicted, Message: fmt.Sprintf(format, args...)}
	}
	t := v.target
	for _, i := range v.pods {
		where := w.podsOf(i, v.id.Namespace)
		if h, ok := o.gatewayWide[i]; ok {
			if t.gatewayWide {
				return conflicted("the gateway-wide scope of %s is already limited by %s; this one is not applied", where, h.by(v))
			}
			return conflicted("%s are already limited gateway-wide by %s; a route's own bucket would replace that limit for the route in Envoy, so this one is not applied", where, h.by(v))
		}
		if t.gatewayWide {
			if h, ok := o.anyRoute[i]; ok {
				return conflicted("routes of %s are already limited by %s; their own buckets would replace a gateway-wide limit in Envoy, so this one is not applied", where, h.by(v))
			}
			continue
		}
		for _, r := range t.routes {
			if h, ok := o.route[routeScope(i, r)]; ok {
				return conflicted("route %s on %s is already limited by %s; this one is not applied", r, where, h.by(v))
			}
		}
	}
	return nil
}

// by names the holder in the status of the visit's policy: a RateLimit of
// another namespace stays unnamed, and a holder from the first pass is said
// to take precedence rather than to be older.
func (h holder) by(v visit) string {
	same := h.id.Namespace == v.id.Namespace
	switch {
	case h.foreign == v.foreign && same:
		return "the older RateLimit " + h.id.String()
	case h.foreign == v.foreign:
		return "an older RateLimit of another namespace"
	case same:
		return "RateLimit " + h.id.String() + ", which applies first as its pods all run in its own namespace"
	}
	return "a RateLimit of the namespace where the pods run, which decides about them before route limits of other namespaces"
}

// take records the visit's scopes as held by its policy.
func (o owners) take(v visit) {
	h := holder{id: v.id, foreign: v.foreign}
	for _, i := range v.pods {
		if v.target.gatewayWide {
			o.gatewayWide[i] = h
			continue
		}
		if _, ok := o.anyRoute[i]; !ok {
			o.anyRoute[i] = h
		}
		for _, r := range v.target.routes {
			o.route[routeScope(i, r)] = h
		}
	}
}

func routeScope(podGroup int, r route) string { return fmt.Sprintf("%d|%s", podGroup, r.key()) }

// podsOf describes a pod group to a RateLimit of namespace viewer: the
// namespace and labels of pods of another tenant's namespace are not its
// business.
func (w *snapshot) podsOf(i int, viewer string) string {
	g := w.pods[i]
	if g.namespace != viewer && g.namespace != w.in.RootNamespace {
		return "the gateway pods of another namespace"
	}
	return fmt.Sprintf("the pods labelled %s in namespace %s", selectorKey(g.labels), g.namespace)
}

func envoyFilter(w *workload, policies map[types.NamespacedName]Policy, g *Global) *networkingv1alpha3client.EnvoyFilter {
	var gatewayClaim *claim
	var routeClaims []claim
	contributors := map[types.NamespacedName]bool{}
	for i := range w.claims {
		contributors[w.claims[i].policy] = true
		if w.claims[i].route == (route{}) {
			gatewayClaim = &w.claims[i]
		} else {
			routeClaims = append(routeClaims, w.claims[i])
		}
	}
	slices.SortFunc(routeClaims, func(a, b claim) int { return compareRoutes(a.route, b.route) })

	ef := &networkingv1alpha3client.EnvoyFilter{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.istio.io/v1alpha3", Kind: "EnvoyFilter"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      w.filterName(),
			Namespace: w.namespace,
			Labels:    map[string]string{LabelManagedBy: ManagedBy, LabelWorkload: w.id(), LabelNamespace: w.tenant},
		},
	}
	if w.namespace == w.tenant {
		ef.OwnerReferences = ownerReferences(contributors, policies)
	}
	name := HTTPFilterName(w.namespace, w.tenant, w.selector)
	// Proto messages must not be copied: fill the object's spec in place.
	spec := &ef.Spec
	spec.WorkloadSelector = &networkingv1alpha3.WorkloadSelector{Labels: maps.Clone(w.selector)}
	if usesLocal(w.claims) {
		spec.ConfigPatches = append(spec.ConfigPatches, listenerFilterPatch(name, gatewayClaim))
	}
	globalName := HTTPGlobalFilterName(w.namespace, w.tenant, w.selector)
	if usesGlobal(w.claims) {
		spec.ConfigPatches = append(spec.ConfigPatches, globalFilterPatch(globalName, globalRateLimit(g, w.tenant, gatewayClaim)))
	}
	if gatewayClaim != nil && len(gatewayClaim.spec.Descriptors) > 0 {
		spec.ConfigPatches = append(spec.ConfigPatches, virtualHostPatch(gatewayClaim))
	}
	for _, c := range routeClaims {
		var global map[string]any
		if c.spec.Global != nil {
			global = map[string]any{globalName: globalRoute(g, w.tenant, c)}
		}
		spec.ConfigPatches = append(spec.ConfigPatches, routePatch(name, c, global))
	}
	return ef
}

// ownerReferences makes every contributing RateLimit an owner of a filter in
// their own namespace, so the garbage collector removes the filter once they
// are all gone even when the controller no longer runs. A filter in Istio's
// root namespace has no owners: the garbage collector treats a
// cross-namespace owner as missing and would delete the filter at once.
func ownerReferences(contributors map[types.NamespacedName]bool, policies map[types.NamespacedName]Policy) []metav1.OwnerReference {
	var refs []metav1.OwnerReference
	for _, id := range slices.SortedFunc(maps.Keys(contributors), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		refs = append(refs, metav1.OwnerReference{
			APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "RateLimit",
			Name: id.Name, UID: policies[id].UID,
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
		})
	}
	return refs
}
