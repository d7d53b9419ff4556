package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
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
	APIRule *gatewayv1alpha1.APIRule
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
	Parent *gatewayv1alpha1.ParentReference
}

// Output holds the desired objects: the route (a VirtualService, or an
// HTTPRoute in HTTPRoute mode) and the access control of the backends.
type Output struct {
	VirtualService *networkingv1.VirtualService `json:"VirtualService,omitempty"`
	HTTPRoute      *gatewayapiv1.HTTPRoute      `json:"HTTPRoute,omitempty"`
	// Workloads has the access control of every backend in the APIRule's
	// own namespace, in the order of Backends. Backends of other namespaces
	// get routes only: their namespace's own policies decide who may call
	// their pods.
	Workloads []Workload
}

// Workload is the access control of one backend Service's pods.
type Workload struct {
	Service               types.NamespacedName
	AuthorizationPolicy   *securityv1.AuthorizationPolicy
	RequestAuthentication *securityv1.RequestAuthentication // nil without JWT rules routed here
	// CustomPolicy hands the requests of the extAuth rules routed here to
	// their authorizer (action CUSTOM); nil without extAuth rules.
	CustomPolicy *securityv1.AuthorizationPolicy `json:",omitempty"`
}

// Object is a Kubernetes object; the package spells it out rather than
// import controller-runtime's client.Object, whose client-go dependencies
// would triple what the fuzz target has to build with instrumentation.
type Object interface {
	metav1.Object
	runtime.Object
}

// Route is the object that routes requests: the HTTPRoute in HTTPRoute
// mode, else the VirtualService.
func (o Output) Route() Object {
	if o.HTTPRoute != nil {
		return o.HTTPRoute
	}
	return o.VirtualService
}

// Objects returns every desired object, the route first.
func (o Output) Objects() []Object {
	objs := []Object{o.Route()}
	for _, w := range o.Workloads {
		objs = append(objs, w.AuthorizationPolicy)
		if w.RequestAuthentication != nil {
			objs = append(objs, w.RequestAuthentication)
		}
		if w.CustomPolicy != nil {
			objs = append(objs, w.CustomPolicy)
		}
	}
	return objs
}

// DefaultService returns the Service that serves rules without their own.
func DefaultService(r *gatewayv1alpha1.APIRule) gatewayv1alpha1.ServiceReference {
	if r.Spec.Service != nil {
		return withNamespace(*r.Spec.Service, r.Namespace)
	}
	for _, rule := range r.Spec.Rules {
		if rule.Service != nil {
			return withNamespace(*rule.Service, r.Namespace)
		}
	}
	return gatewayv1alpha1.ServiceReference{}
}

// Services returns every Service port the APIRule routes to, sorted.
func Services(r *gatewayv1alpha1.APIRule) []gatewayv1alpha1.ServiceReference {
	seen := map[gatewayv1alpha1.ServiceReference]bool{}
	var out []gatewayv1alpha1.ServiceReference
	for _, rule := range r.Spec.Rules {
		for _, d := range destinationsOf(r, rule) {
			if s := d.service; !seen[s] {
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
func Backends(r *gatewayv1alpha1.APIRule) []types.NamespacedName {
	var out []types.NamespacedName
	for _, s := range Services(r) {
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

func withNamespace(s gatewayv1alpha1.ServiceReference, ns string) gatewayv1alpha1.ServiceReference {
	if s.Namespace == "" {
		s.Namespace = ns
	}
	return s
}

func serviceOf(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) gatewayv1alpha1.ServiceReference {
	if rule.Service != nil {
		return withNamespace(*rule.Service, r.Namespace)
	}
	return DefaultService(r)
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
func PolicyName(r *gatewayv1alpha1.APIRule, backend types.NamespacedName) string {
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

// checkRules runs the checks of the rules against each other, in order:
// the first refusal is the one reported.
func checkRules(r *gatewayv1alpha1.APIRule, selectors map[types.NamespacedName]map[string]string) error {
	for _, check := range []func() error{
		func() error { return checkIssuers(r) },
		func() error { return checkMatches(r) },
		func() error { return checkDuplicates(r) },
		func() error { return checkCoveredRules(r, selectors) },
		func() error { return checkTemplateOverlaps(r, selectors) },
		func() error { return checkRequestModifiers(r) },
		func() error { return checkRewriteTargets(r, selectors) },
		func() error { return checkSharedRequests(r, selectors) },
		func() error { return checkAuthorizers(r, selectors) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Translate builds the Istio objects of an APIRule, or explains why the
// APIRule cannot be enforced as written.
func Translate(in Input) (Output, error) {
	r := in.APIRule
	if err := checkForgedRequests(r); err != nil {
		return Output{}, err
	}
	if err := checkPaths(r); err != nil {
		return Output{}, err
	}
	if err := checkBackends(r); err != nil {
		return Output{}, err
	}
	backends := Backends(r)
	for _, b := range backends {
		if b.Name == "" {
			return Output{}, fmt.Errorf("a rule names no service and spec.service is not set")
		}
		if len(in.Selectors[b]) == 0 {
			return Output{}, fmt.Errorf("service %s has no pod selector, so access rules cannot be bound to a workload", b)
		}
	}
	if err := checkRules(r, in.Selectors); err != nil {
		return Output{}, err
	}
	var out Output
	if in.Parent != nil {
		if err := checkHTTPRoute(r); err != nil {
			return Output{}, err
		}
		if err := checkTemplateRoutes(r); err != nil {
			return Output{}, err
		}
		out.HTTPRoute = httpRoute(r, in.Parent)
	} else {
		gateway := in.Gateway
		if gateway == "" {
			gateway = r.Spec.Gateway
		}
		if gateway == "" {
			return Output{}, fmt.Errorf("the APIRule names no gateway and no default gateway was given")
		}
		out.VirtualService = virtualService(r, gateway, in.ClusterDomain)
	}
	names := map[types.NamespacedName]types.NamespacedName{}
	for _, b := range backends {
		if b.Namespace != r.Namespace {
			// Consent to route is not consent to set access rules: the
			// Service's own namespace decides who may call its pods.
			continue
		}
		w := Workload{Service: b}
		meta := objectMeta(r, b.Namespace, PolicyName(r, b))
		key := types.NamespacedName{Namespace: meta.Namespace, Name: meta.Name}
		if other, taken := names[key]; taken {
			return Output{}, fmt.Errorf("services %s and %s would share the access policy %s; rename one of them", other, b, key)
		}
		names[key] = b
		if custom := customPolicy(r, b, in.Selectors[b]); custom != nil {
			customKey := types.NamespacedName{Namespace: custom.Namespace, Name: custom.Name}
			if other, taken := names[customKey]; taken {
				return Output{}, fmt.Errorf("services %s and %s would share the access policy %s; rename one of them", other, b, customKey)
			}
			names[customKey] = b
			w.CustomPolicy = custom
		}
		w.AuthorizationPolicy = authorizationPolicy(r, b, meta, in.Selectors[b])
		if jwtRules := jwtRules(r, b); len(jwtRules) > 0 {
			ra := &securityv1.RequestAuthentication{
				TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "RequestAuthentication"},
				ObjectMeta: objectMeta(r, b.Namespace, meta.Name),
			}
			ra.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(in.Selectors[b])}
			ra.Spec.JwtRules = jwtRules
			w.RequestAuthentication = ra
		}
		out.Workloads = append(out.Workloads, w)
	}
	return out, nil
}

// objectMeta labels an object for its APIRule and, in the APIRule's
// namespace, makes the APIRule its controlling owner. Owner references
// across namespaces are invalid (the garbage collector treats the owner as
// absent and deletes the object), so objects elsewhere carry only labels.
func objectMeta(r *gatewayv1alpha1.APIRule, namespace, name string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    map[string]string{LabelManagedBy: ManagedBy, LabelAPIRule: r.Name, LabelAPIRuleNamespace: r.Namespace},
	}
	if namespace == r.Namespace {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: gatewayv1alpha1.GroupVersion.String(), Kind: "APIRule", Name: r.Name, UID: r.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	}
	return m
}

// checkPaths rejects paths that Istio would read differently from the
// APIRule (the API server rejects them too; the controller must not rely on
// it): an AuthorizationPolicy path starting or ending with '*' is a suffix
// or prefix match, anything else is exact.
func checkPaths(r *gatewayv1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		p := rule.Path
		if isTemplate(p) {
			if err := checkTemplate(p); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(strings.TrimSuffix(p, "/*"), "*") {
			return fmt.Errorf("path %q must start with '/' and may only end with the wildcard '/*'", p)
		}
	}
	return nil
}

// orderedRules sorts rules so Istio, which takes the first matching route,
// prefers exact paths, then templates, then longer prefixes, then as the
// Gateway API ranks matches of one path (morePreciseMatch: methods, more
// header matches, more query-parameter matches), so that both outputs send
// a request to the same rule; ties are broken by route name, which the
// HTTPRoute keeps as its rule order.
func orderedRules(r *gatewayv1alpha1.APIRule) []gatewayv1alpha1.Rule {
	rules := slices.Clone(r.Spec.Rules)
	sort.SliceStable(rules, func(i, j int) bool {
		if ri, rj := pathRank(rules[i].Path), pathRank(rules[j].Path); ri != rj {
			return ri < rj
		}
		if len(rules[i].Path) != len(rules[j].Path) {
			return len(rules[i].Path) > len(rules[j].Path)
		}
		if c := morePreciseMatch(rules[i], rules[j]); c != 0 {
			return c < 0
		}
		return gatewayv1alpha1.RouteName(r.Namespace, r.Name, rules[i]) < gatewayv1alpha1.RouteName(r.Namespace, r.Name, rules[j])
	})
	return rules
}

func isPrefix(path string) bool { return strings.HasSuffix(path, "/*") }

func uriMatch(path string) *networkingv1alpha3.StringMatch {
	if isTemplate(path) {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: templateRegex(path)}}
	}
	if isPrefix(path) {
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: strings.TrimSuffix(path, "*")}}
	}
	return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: path}}
}

func methodStrings(methods []gatewayv1alpha1.HTTPMethod) []string {
	out := make([]string, len(methods))
	for i, m := range methods {
		out[i] = string(m)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func duration(d *metav1.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(d.Duration)
}

func virtualService(r *gatewayv1alpha1.APIRule, gateway, clusterDomain string) *networkingv1.VirtualService {
	if clusterDomain == "" {
		clusterDomain = "cluster.local"
	}
	hosts := make([]string, len(r.Spec.Hosts))
	for i, h := range r.Spec.Hosts {
		hosts[i] = string(h)
	}
	vs := &networkingv1.VirtualService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "VirtualService"},
		ObjectMeta: objectMeta(r, r.Namespace, r.Name),
	}
	// Proto messages must not be copied: fill the object's spec in place.
	spec := &vs.Spec
	spec.Hosts, spec.Gateways = hosts, []string{gateway}
	for _, rule := range orderedRules(r) {
		match := &networkingv1alpha3.HTTPMatchRequest{Uri: uriMatch(rule.Path)}
		if methods := methodStrings(rule.Methods); len(methods) > 0 {
			match.Method = &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{
				Regex: "^(" + strings.Join(methods, "|") + ")$",
			}}
		}
		addIstioMatches(rule, match)
		timeout := rule.Timeout
		if timeout == nil {
			timeout = r.Spec.Timeout
		}
		spec.Http = append(spec.Http, &networkingv1alpha3.HTTPRoute{
			Headers:    headersOperations(rule),
			Name:       gatewayv1alpha1.RouteName(r.Namespace, r.Name, rule),
			Match:      []*networkingv1alpha3.HTTPMatchRequest{match},
			Route:      routeDestinations(r, rule, clusterDomain),
			Timeout:    duration(timeout),
			Retries:    retries(rule.Retries),
			Rewrite:    uriRewrite(rule),
			CorsPolicy: corsPolicy(r.Spec.CORS),
		})
	}
	return vs
}

// routeDestinations are the Service ports of a rule, with the weights of
// weighted backends (percentages adding up to 100, as Istio reads them);
// a rule's only Service has none and receives every request.
func routeDestinations(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule, clusterDomain string) []*networkingv1alpha3.HTTPRouteDestination {
	var out []*networkingv1alpha3.HTTPRouteDestination
	for _, d := range destinationsOf(r, rule) {
		out = append(out, &networkingv1alpha3.HTTPRouteDestination{
			Destination: &networkingv1alpha3.Destination{
				Host: fmt.Sprintf("%s.%s.svc.%s", d.service.Name, d.service.Namespace, clusterDomain),
				Port: &networkingv1alpha3.PortSelector{Number: uint32(d.service.Port)},
			},
			Weight: d.weight,
		})
	}
	return out
}

// uriRewrite rewrites an exact path, or the matched prefix of a prefix
// rule (Istio replaces the prefix it matched, "/orders/"), or with a regex
// the whole path of a prefix rule, of which uri would replace only the
// prefix.
func uriRewrite(rule gatewayv1alpha1.Rule) *networkingv1alpha3.HTTPRewrite {
	rw := rule.Rewrite
	switch {
	case rw == nil:
		return nil
	case rw.Path != "" && (isPrefix(rule.Path) || isTemplate(rule.Path)):
		return &networkingv1alpha3.HTTPRewrite{UriRegexRewrite: &networkingv1alpha3.RegexRewrite{Match: "^.*$", Rewrite: string(rw.Path)}}
	default:
		return &networkingv1alpha3.HTTPRewrite{Uri: string(rw.Path + rw.Prefix)}
	}
}

// headersOperations sets a rule's request headers and cookies.
func headersOperations(rule gatewayv1alpha1.Rule) *networkingv1alpha3.Headers {
	set := requestHeaders(rule)
	if len(set) == 0 {
		return nil
	}
	ops := &networkingv1alpha3.Headers_HeaderOperations{Set: map[string]string{}}
	for _, h := range set {
		ops.Set[h[0]] = h[1]
	}
	return &networkingv1alpha3.Headers{Request: ops}
}

// retries is a rule's retry policy as Istio's: the retryOn conditions,
// sorted, then the status codes, which Istio turns into Envoy's
// retriable-status-codes.
func retries(p *gatewayv1alpha1.RetryPolicy) *networkingv1alpha3.HTTPRetry {
	if p == nil {
		return nil
	}
	var on []string
	for _, c := range p.RetryOn {
		on = append(on, string(c))
	}
	slices.Sort(on)
	on = slices.Compact(on)
	codes := slices.Compact(slices.Sorted(slices.Values(p.Codes)))
	for _, c := range codes {
		on = append(on, fmt.Sprint(c))
	}
	return &networkingv1alpha3.HTTPRetry{
		Attempts:      p.Attempts,
		PerTryTimeout: duration(p.PerTryTimeout),
		RetryOn:       strings.Join(on, ","),
	}
}

func corsPolicy(c *gatewayv1alpha1.CORSPolicy) *networkingv1alpha3.CorsPolicy {
	if c == nil {
		return nil
	}
	p := &networkingv1alpha3.CorsPolicy{
		AllowMethods:  methodStrings(c.AllowMethods),
		AllowHeaders:  slices.Clone(c.AllowHeaders),
		ExposeHeaders: slices.Clone(c.ExposeHeaders),
		MaxAge:        duration(c.MaxAge),
	}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			p.AllowOrigins = append(p.AllowOrigins, &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: ".*"}})
			continue
		}
		p.AllowOrigins = append(p.AllowOrigins, &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: o}})
	}
	if c.AllowCredentials != nil {
		p.AllowCredentials = wrapperspb.Bool(*c.AllowCredentials)
	}
	return p
}

// authorizationPolicy allows, on one backend's pods, the requests of the
// rules routed to it. Istio allows a request that any ALLOW rule of any
// policy on the workload matches, so checkCoveredRules must have made sure
// that no rule matches a request another rule guards with other
// authentication. A rule's header and query-parameter matches add no
// condition here: the client chooses them, so requiring them would guard
// nothing (checkSharedRequests makes such rules agree instead).
func authorizationPolicy(r *gatewayv1alpha1.APIRule, backend types.NamespacedName, meta metav1.ObjectMeta, selector map[string]string) *securityv1.AuthorizationPolicy {
	ap := &securityv1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy"},
		ObjectMeta: meta,
	}
	spec := &ap.Spec
	spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(selector)}
	spec.Action = securityv1beta1.AuthorizationPolicy_ALLOW
	for _, exposed := range orderedRules(r) {
		if !servesBackend(r, exposed, backend) {
			continue
		}
		op := &securityv1beta1.Operation{Paths: []string{BackendPath(exposed)}, Methods: methodStrings(exposed.Methods)}
		token := exposed.TokenRequirement()
		if token == nil {
			// noAuth, or extAuth without restrictions: the CUSTOM policy
			// (customPolicy) has the authorizer decide first.
			spec.Rules = append(spec.Rules, &securityv1beta1.Rule{To: []*securityv1beta1.Rule_To{{Operation: op}}})
			continue
		}
		spec.Rules = append(spec.Rules, callerRules(accessOf(token), op)...)
	}
	return ap
}

// checkDuplicates rejects two rules for the same requests: only the first
// would route, but both would be allowed on the pods they share. Rules
// whose matches differ route differently, and checkSharedRequests makes
// them agree on authentication.
func checkDuplicates(r *gatewayv1alpha1.APIRule) error {
	for i, a := range r.Spec.Rules {
		for _, b := range r.Spec.Rules[i+1:] {
			if a.Path == b.Path && methodsOverlap(a.Methods, b.Methods) && a.Match.Key() == b.Match.Key() {
				return fmt.Errorf("two rules have the path %s and a method in common, and the same match (or none)", a.Path)
			}
		}
	}
	return nil
}

// checkCoveredRules rejects a prefix rule that covers another rule's path,
// with a method in common, on pods both may reach, with other
// authentication. Istio adds up the ALLOW rules of every policy on a
// workload, so the covering rule would let its callers into the covered
// path (a noAuth "/api/*" would open a JWT "/api/admin"). The API server
// checks this for rules naming the same service; here it is checked for
// every pair, including rules whose Services differ but select common pods.
func checkCoveredRules(r *gatewayv1alpha1.APIRule, selectors map[types.NamespacedName]map[string]string) error {
	for i, a := range r.Spec.Rules {
		if !isPrefix(a.Path) {
			continue
		}
		for j, b := range r.Spec.Rules {
			if i == j {
				continue
			}
			if !strings.HasPrefix(b.Path, strings.TrimSuffix(a.Path, "*")) || !methodsOverlap(a.Methods, b.Methods) ||
				sameAuthentication(a, b) {
				continue
			}
			wb, shared := sharedWorkload(r, a, b, selectors)
			if !shared {
				continue
			}
			return fmt.Errorf("rule %s (%s) covers rule %s (%s) on the pods of service %s, which Istio would open to the callers of %s: "+
				"give both the same authentication, disjoint methods, or disjoint paths",
				a.Path, authentication(a), b.Path, authentication(b), wb, a.Path)
		}
	}
	return nil
}

// MayShareWorkload reports whether two Services may select common pods:
// both in one namespace, and no label that both select on with different
// values. The same Service always does.
func MayShareWorkload(a types.NamespacedName, selA map[string]string, b types.NamespacedName, selB map[string]string) bool {
	if a == b {
		return true
	}
	if a.Namespace != b.Namespace {
		return false
	}
	for k, v := range selA {
		if w, ok := selB[k]; ok && w != v {
			return false
		}
	}
	return true
}

func methodsOverlap(a, b []gatewayv1alpha1.HTTPMethod) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, m := range a {
		if slices.Contains(b, m) {
			return true
		}
	}
	return false
}

func sameAuthentication(a, b gatewayv1alpha1.Rule) bool {
	if a.Authorizer() != b.Authorizer() {
		return false
	}
	ta, tb := a.TokenRequirement(), b.TokenRequirement()
	if ta == nil || tb == nil {
		return ta == nil && tb == nil
	}
	return accessOf(ta).equal(accessOf(tb))
}

// authentication describes what a rule demands of a caller; two rules
// demanding the same have the same description.
func authentication(rule gatewayv1alpha1.Rule) string {
	token := rule.TokenRequirement()
	if authorizer := rule.Authorizer(); authorizer != "" {
		if token == nil {
			return "extAuth " + authorizer
		}
		return "extAuth " + authorizer + " then " + accessOf(token).String()
	}
	if token == nil {
		return "noAuth"
	}
	return accessOf(token).String()
}
