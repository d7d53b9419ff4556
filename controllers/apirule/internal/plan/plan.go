package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/paths"
)

// Labels on every object the apirule controller writes. Objects in another
// namespace than their APIRule's cannot have an owner reference to it; these
// labels are how the controller finds them again (to update and delete them).
const (
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	ManagedBy             = "apirule-controller"
	LabelAPIRule          = "gateway.portico.dev/apirule"
	LabelAPIRuleNamespace = "gateway.portico.dev/apirule-namespace"
)

// Input is an APIRule and what the cluster told about its backends.
type Input struct {
	APIRule *porticov1alpha1.APIRule
	// Selectors holds the pod selector of every Service the rules route to
	// (see Backends): the workloads the AuthorizationPolicies and
	// RequestAuthentications apply to.
	Selectors map[types.NamespacedName]map[string]string
	// ClusterDomain completes Service host names; "cluster.local" when empty.
	ClusterDomain string
	// Gateway is the Istio Gateway, as <namespace>/<name>, the
	// VirtualService binds to: the one the APIRule names, or the default
	// gateway the controller resolved for an APIRule that names none. When
	// empty, the APIRule's spec.gateway.
	Gateway string
	// Parent is the Gateway API Gateway the HTTPRoute attaches to: the
	// APIRule's parentRef (Parent) in HTTPRoute mode. When set, the output
	// has an HTTPRoute instead of a VirtualService.
	Parent *porticov1alpha1.ParentReference
	// TrustedProxies is the administrator's count of proxies in front of
	// the gateways (APIGateway spec.apiRules.trustedProxies); nil when not
	// set, which refuses rules with clientAddresses.
	TrustedProxies *int32
}

// Plan is an APIRule normalised once: what every renderer reads. Building
// it refuses nothing (Check does); renderers run on checked plans only.
type Plan struct {
	// APIRule is the source, for the checks and the objects' identity.
	APIRule   *porticov1alpha1.APIRule
	Selectors map[types.NamespacedName]map[string]string
	Hosts     []string
	// Gateway is the Istio Gateway of Istio mode (Input.Gateway, else
	// spec.gateway); Parent the Gateway API parent of HTTPRoute mode, nil in
	// Istio mode.
	Gateway       string
	Parent        *porticov1alpha1.ParentReference
	ClusterDomain string
	CORS          *porticov1alpha1.CORSPolicy
	// TrustedProxies is Input.TrustedProxies.
	TrustedProxies *int32
	// Rules are in the APIRule's order; Routes are the same rules in the
	// order routes are tried (see orderedRules).
	Rules  []*Rule
	Routes []*Rule
	// Backends are every Service the rules route to, sorted; Workloads the
	// ones in the APIRule's namespace, which get access control.
	Backends  []types.NamespacedName
	Workloads []Workload
}

// Rule is one rule of the plan: its match, where it routes, how it changes
// requests, and what it demands of callers.
type Rule struct {
	// Spec is the rule as written.
	Spec porticov1alpha1.Rule
	// RouteName names its VirtualService route; RuleName its HTTPRoute rule.
	RouteName, RuleName string
	Path                string
	// Methods are sorted, each once; none means every method.
	Methods []string
	Match   *porticov1alpha1.RequestMatch
	// Destinations are the Service ports it routes to; Weighted says they
	// are weighted backends (else one Service receives every request).
	Destinations []Destination
	Weighted     bool
	// Backends are the Services of Destinations, in order, each once.
	Backends []types.NamespacedName
	// Timeout is the rule's, else the APIRule's; nil without either.
	Timeout *metav1.Duration
	Retries *porticov1alpha1.RetryPolicy
	// RequestHeaders are the headers it sets, sorted by name (its cookies
	// as one cookie header).
	RequestHeaders [][2]string
	Rewrite        *porticov1alpha1.Rewrite
	// BackendPath is the path pattern its requests have at the backend.
	BackendPath string
	// Token is its jwt requirement (nil for noAuth or unrestricted
	// extAuth), Access the same normalised; Authorizer its external
	// authorizer ("" without extAuth).
	Token      *porticov1alpha1.JWTAuthentication
	Access     *access.JWT
	Authorizer string
	// Headers are its request header removals and response headers;
	// Clients its client-address access, nil without clientAddresses.
	Headers HeaderChanges
	Clients *Clients
}

// Destination is one Service port a rule routes to, with its percentage of
// the rule's requests; Weight is 0 for a rule's only Service, which
// receives them all.
type Destination struct {
	Service porticov1alpha1.ServiceReference
	Weight  int32
}

// Workload is a backend in the APIRule's namespace: the pods its access
// control applies to.
type Workload struct {
	Service  types.NamespacedName
	Selector map[string]string
	// PolicyName names its ALLOW AuthorizationPolicy and its
	// RequestAuthentication; CustomPolicyName its CUSTOM policy.
	PolicyName, CustomPolicyName string
}

// New normalises an APIRule into a plan.
func New(in Input) *Plan {
	r := in.APIRule
	p := &Plan{
		APIRule: r, Selectors: in.Selectors, Parent: in.Parent,
		Gateway: in.Gateway, ClusterDomain: in.ClusterDomain, CORS: r.Spec.CORS,
		TrustedProxies: in.TrustedProxies,
	}
	if p.Gateway == "" {
		p.Gateway = r.Spec.Gateway
	}
	if p.ClusterDomain == "" {
		p.ClusterDomain = "cluster.local"
	}
	p.Hosts = make([]string, len(r.Spec.Hosts))
	for i, h := range r.Spec.Hosts {
		p.Hosts[i] = string(h)
	}
	for _, spec := range r.Spec.Rules {
		p.Rules = append(p.Rules, newRule(r, spec))
	}
	p.Routes = orderedRules(r, p.Rules)
	p.Backends = Backends(r)
	for _, b := range p.Backends {
		if b.Namespace != r.Namespace {
			// Consent to route is not consent to set access rules: the
			// Service's own namespace decides who may call its pods.
			continue
		}
		p.Workloads = append(p.Workloads, Workload{
			Service: b, Selector: in.Selectors[b],
			PolicyName: PolicyName(r, b), CustomPolicyName: ExtAuthPolicyName(r, b),
		})
	}
	return p
}

func newRule(r *porticov1alpha1.APIRule, spec porticov1alpha1.Rule) *Rule {
	rule := &Rule{
		Spec:           spec,
		RouteName:      porticov1alpha1.RouteName(r.Namespace, r.Name, spec),
		RuleName:       porticov1alpha1.HTTPRouteRuleName(r.Namespace, r.Name, spec),
		Path:           spec.Path,
		Methods:        MethodStrings(spec.Methods),
		Match:          spec.Match,
		Destinations:   destinationsOf(r, spec),
		Weighted:       len(spec.Backends) > 0,
		Backends:       backendsOf(r, spec),
		Timeout:        spec.Timeout,
		Retries:        spec.Retries,
		RequestHeaders: requestHeaders(spec),
		Rewrite:        spec.Rewrite,
		BackendPath:    BackendPath(spec),
		Token:          spec.TokenRequirement(),
		Authorizer:     spec.Authorizer(),
		Headers:        headerChanges(spec),
		Clients:        clientsOf(spec),
	}
	if rule.Timeout == nil {
		rule.Timeout = r.Spec.Timeout
	}
	if rule.Token != nil {
		rule.Access = ptr.To(access.OfJWT(rule.Token))
	}
	return rule
}

// Serves reports whether a rule routes requests to backend, with whatever
// weight: a backend of weight 0 keeps its access rules, so that raising its
// weight never routes to pods without them.
func (r *Rule) Serves(backend types.NamespacedName) bool {
	return slices.Contains(r.Backends, backend)
}

// ObjectMeta labels an object for its APIRule and, in the APIRule's
// namespace, makes the APIRule its controlling owner. Owner references
// across namespaces are invalid (the garbage collector treats the owner as
// absent and deletes the object), so objects elsewhere carry only labels.
func (p *Plan) ObjectMeta(namespace, name string) metav1.ObjectMeta {
	r := p.APIRule
	m := metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    map[string]string{LabelManagedBy: ManagedBy, LabelAPIRule: r.Name, LabelAPIRuleNamespace: r.Namespace},
	}
	if namespace == r.Namespace {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: porticov1alpha1.GroupVersion.String(), Kind: "APIRule", Name: r.Name, UID: r.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	}
	return m
}

// Parent returns the Gateway API parent of an APIRule in HTTPRoute mode,
// with its defaults filled in (group, kind, the APIRule's namespace), or
// nil for an APIRule in Istio mode.
func Parent(r *porticov1alpha1.APIRule) *porticov1alpha1.ParentReference {
	if r.Spec.ParentRef == nil {
		return nil
	}
	p := *r.Spec.ParentRef
	if p.Group == "" {
		p.Group = porticov1alpha1.GatewayAPIGroup
	}
	if p.Kind == "" {
		p.Kind = "Gateway"
	}
	if p.Namespace == "" {
		p.Namespace = r.Namespace
	}
	return &p
}

// DefaultService returns the Service that serves rules without their own.
func DefaultService(r *porticov1alpha1.APIRule) porticov1alpha1.ServiceReference {
	if r.Spec.Service != nil {
		return withNamespace(*r.Spec.Service, r.Namespace)
	}
	for _, rule := range r.Spec.Rules {
		if rule.Service != nil {
			return withNamespace(*rule.Service, r.Namespace)
		}
	}
	return porticov1alpha1.ServiceReference{}
}

// Services returns every Service port the APIRule routes to, sorted.
func Services(r *porticov1alpha1.APIRule) []porticov1alpha1.ServiceReference {
	seen := map[porticov1alpha1.ServiceReference]bool{}
	var out []porticov1alpha1.ServiceReference
	for _, rule := range r.Spec.Rules {
		for _, d := range destinationsOf(r, rule) {
			if s := d.Service; !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name || (out[i] == out[j] && out[i].Port < out[j].Port)
	})
	return out
}

// Backends returns every Service the APIRule routes to, whatever the port,
// sorted by namespace and name: each is one workload with its own access
// control.
func Backends(r *porticov1alpha1.APIRule) []types.NamespacedName {
	var out []types.NamespacedName
	for _, s := range Services(r) {
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

func withNamespace(s porticov1alpha1.ServiceReference, ns string) porticov1alpha1.ServiceReference {
	if s.Namespace == "" {
		s.Namespace = ns
	}
	return s
}

// ServiceOf is the Service of a rule without weighted backends: its own,
// else the APIRule's default.
func ServiceOf(r *porticov1alpha1.APIRule, rule porticov1alpha1.Rule) porticov1alpha1.ServiceReference {
	if rule.Service != nil {
		return withNamespace(*rule.Service, r.Namespace)
	}
	return DefaultService(r)
}

// destinationsOf returns the Service ports a rule routes to: its weighted
// backends, or its one service (the rule's own or spec.service).
func destinationsOf(r *porticov1alpha1.APIRule, rule porticov1alpha1.Rule) []Destination {
	if len(rule.Backends) == 0 {
		return []Destination{{Service: ServiceOf(r, rule)}}
	}
	out := make([]Destination, 0, len(rule.Backends))
	for _, b := range rule.Backends {
		out = append(out, Destination{Service: withNamespace(b.Service, r.Namespace), Weight: b.Weight})
	}
	return out
}

// backendsOf returns the Services a rule routes to, in the rule's order:
// the workloads its access rules must be on.
func backendsOf(r *porticov1alpha1.APIRule, rule porticov1alpha1.Rule) []types.NamespacedName {
	var out []types.NamespacedName
	for _, d := range destinationsOf(r, rule) {
		key := types.NamespacedName{Namespace: d.Service.Namespace, Name: d.Service.Name}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// maxNameLength keeps generated names valid as label values and DNS labels.
const maxNameLength = 63

// PolicyName is the name of the AuthorizationPolicy and RequestAuthentication
// of one backend, which live in the backend's namespace. The default
// Service's are named like the APIRule; another Service's are
// <apirule>-<service>; in another namespace than the APIRule's, the name is
// prefixed with the APIRule's namespace, so that APIRules of two namespaces
// do not compete for one name. Names beyond 63 characters are shortened
// with a hash of the full name.
func PolicyName(r *porticov1alpha1.APIRule, backend types.NamespacedName) string {
	def := DefaultService(r)
	name := r.Name
	if backend.Namespace != def.Namespace || backend.Name != def.Name {
		name += "-" + backend.Name
	}
	if backend.Namespace != r.Namespace {
		name = r.Namespace + "-" + name
	}
	return shortened(name)
}

// extAuthSuffix ends the name of a backend's CUSTOM AuthorizationPolicy.
const extAuthSuffix = "-extauth"

// ExtAuthPolicyName is the name of the AuthorizationPolicy with action
// CUSTOM of one backend: its PolicyName followed by "-extauth", shortened
// with a hash beyond 63 characters.
func ExtAuthPolicyName(r *porticov1alpha1.APIRule, backend types.NamespacedName) string {
	return CustomPolicyOf(PolicyName(r, backend))
}

// CustomPolicyOf is the name of the CUSTOM AuthorizationPolicy beside the
// ALLOW policy named allowPolicy.
func CustomPolicyOf(allowPolicy string) string {
	return shortened(allowPolicy + extAuthSuffix)
}

// shortened keeps a name within 63 characters: a longer one is cut and
// ends with a hash of the full name.
func shortened(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(name[:maxNameLength-len(hash)-1], "-.") + "-" + hash
}

// Authorizers lists the external authorizers the APIRule's rules name,
// sorted, each once: what the administrator must have granted to its
// namespace.
func Authorizers(r *porticov1alpha1.APIRule) []string {
	var out []string
	for _, rule := range r.Spec.Rules {
		if rule.ExtAuth != nil {
			out = append(out, rule.ExtAuth.Authorizers...)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// orderedRules sorts rules so Istio, which takes the first matching route,
// prefers exact paths, then templates, then longer prefixes, then as the
// Gateway API ranks matches of one path (morePreciseMatch: methods, more
// header matches, more query-parameter matches), so that both outputs send
// a request to the same rule; ties are broken by route name, which the
// HTTPRoute keeps as its rule order.
func orderedRules(r *porticov1alpha1.APIRule, rules []*Rule) []*Rule {
	rules = slices.Clone(rules)
	sort.SliceStable(rules, func(i, j int) bool {
		a, b := rules[i].Spec, rules[j].Spec
		if ri, rj := paths.Rank(a.Path), paths.Rank(b.Path); ri != rj {
			return ri < rj
		}
		if len(a.Path) != len(b.Path) {
			return len(a.Path) > len(b.Path)
		}
		if c := morePreciseMatch(a, b); c != 0 {
			return c < 0
		}
		return porticov1alpha1.RouteName(r.Namespace, r.Name, a) < porticov1alpha1.RouteName(r.Namespace, r.Name, b)
	})
	return rules
}

// MethodStrings are methods as strings, sorted, each once.
func MethodStrings(methods []porticov1alpha1.HTTPMethod) []string {
	out := make([]string, len(methods))
	for i, m := range methods {
		out[i] = string(m)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func matchCounts(rule porticov1alpha1.Rule) (headers, queryParams int) {
	if rule.Match == nil {
		return 0, 0
	}
	return len(rule.Match.Headers), len(rule.Match.QueryParams)
}

// morePreciseMatch orders two rules of the same path kind and length the
// way the Gateway API ranks matches: a rule with methods, then more header
// matches, then more query-parameter matches first. It returns 0 on a tie.
func morePreciseMatch(a, b porticov1alpha1.Rule) int {
	if ma, mb := len(a.Methods) > 0, len(b.Methods) > 0; ma != mb {
		if ma {
			return -1
		}
		return 1
	}
	ha, qa := matchCounts(a)
	hb, qb := matchCounts(b)
	if ha != hb {
		return hb - ha
	}
	return qb - qa
}

// cookieHeader carries a rule's cookies.
const cookieHeader = "cookie"

// requestHeaders are the headers a rule sets, sorted by name: its headers
// and, for its cookies, one cookie header ("a=1; b=2", sorted by name)
// that replaces the client's.
func requestHeaders(rule porticov1alpha1.Rule) [][2]string {
	m := rule.Request
	if m == nil {
		return nil
	}
	var out [][2]string
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		out = append(out, [2]string{name, string(m.Headers[name])})
	}
	if len(m.Cookies) > 0 {
		var pairs []string
		for _, name := range slices.Sorted(maps.Keys(m.Cookies)) {
			pairs = append(pairs, name+"="+string(m.Cookies[name]))
		}
		out = append(out, [2]string{cookieHeader, strings.Join(pairs, "; ")})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// BackendPath is the path pattern a rule's requests have when they reach
// the backend, in the AuthorizationPolicy's syntax: the rule's path, or
// what its rewrite makes of it (rewrite.path exactly, rewrite.prefix
// followed by anything).
func BackendPath(rule porticov1alpha1.Rule) string {
	switch rw := rule.Rewrite; {
	case rw == nil:
		return rule.Path
	case rw.Path != "":
		return string(rw.Path)
	default:
		return string(rw.Prefix) + "*"
	}
}
