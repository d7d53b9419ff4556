package plan

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/paths"
)

// Bounds the CRD sets too (the controller does not rely on admission);
// TestBoundsMatchTheCRD ties each to its marker.
const (
	minWeightedBackends = 2
	minRetryAttempts    = 1
	maxRetryAttempts    = 10
	minRetryCode        = 400
	maxRetryCode        = 599
	maxRewriteLength    = 256
)

// Check refuses what the plan's APIRule cannot be enforced as: every
// refusal of the translation is here, in the order they are reported (the
// first one wins). Renderers may assume a checked plan.
func Check(p *Plan) error {
	r := p.APIRule
	for _, check := range []func() error{
		func() error { return checkForgedRequests(r) },
		func() error { return checkPaths(r) },
		func() error { return checkBackends(r) },
		func() error { return checkWorkloads(p) },
		func() error { return checkIssuers(r) },
		func() error { return checkMatches(r) },
		func() error { return checkDuplicates(r) },
		func() error { return checkCoveredRules(p) },
		func() error { return checkTemplateOverlaps(p) },
		func() error { return checkRequestModifiers(r) },
		func() error { return checkRewriteTargets(p) },
		func() error { return checkSharedRequests(p) },
		func() error { return checkAuthorizers(p) },
		func() error { return checkClientAddresses(p) },
		func() error { return checkMode(p) },
		func() error { return checkPolicyNames(p) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkWorkloads refuses a backend access rules cannot be bound to.
func checkWorkloads(p *Plan) error {
	for _, b := range p.Backends {
		if b.Name == "" {
			return fmt.Errorf("a rule names no service and spec.service is not set")
		}
		if len(p.Selectors[b]) == 0 {
			return fmt.Errorf("service %s has no pod selector, so access rules cannot be bound to a workload", b)
		}
	}
	return nil
}

// checkMode refuses what the output of the APIRule's mode cannot say: in
// HTTPRoute mode what an HTTPRoute cannot, in Istio mode a missing gateway.
func checkMode(p *Plan) error {
	if p.Parent != nil {
		if err := checkHTTPRoute(p.APIRule); err != nil {
			return err
		}
		return checkTemplateRoutes(p.APIRule)
	}
	if p.Gateway == "" {
		return fmt.Errorf("the APIRule names no gateway and no default gateway was given")
	}
	return nil
}

// checkPolicyNames refuses two backends whose access policies (ALLOW, or
// the CUSTOM one of backends with extAuth rules) would have one name.
func checkPolicyNames(p *Plan) error {
	names := map[types.NamespacedName]types.NamespacedName{}
	claim := func(b types.NamespacedName, name string) error {
		key := types.NamespacedName{Namespace: b.Namespace, Name: name}
		if other, taken := names[key]; taken {
			return fmt.Errorf("services %s and %s would share the access policy %s; rename one of them", other, b, key)
		}
		names[key] = b
		return nil
	}
	for _, w := range p.Workloads {
		if err := claim(w.Service, w.PolicyName); err != nil {
			return err
		}
		if !slices.ContainsFunc(p.Rules, func(rule *Rule) bool { return rule.Authorizer != "" && rule.Serves(w.Service) }) {
			continue
		}
		if err := claim(w.Service, w.CustomPolicyName); err != nil {
			return err
		}
	}
	return nil
}

// checkPaths rejects paths that Istio would read differently from the
// APIRule (the API server rejects them too; the controller must not rely on
// it): an AuthorizationPolicy path starting or ending with '*' is a suffix
// or prefix match, anything else is exact.
func checkPaths(r *porticov1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		p := rule.Path
		if paths.IsTemplate(p) {
			if err := paths.CheckTemplate(p); err != nil {
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

// checkDuplicates rejects two rules for the same requests: only the first
// would route, but both would be allowed on the pods they share. Rules
// whose matches differ route differently, and checkSharedRequests makes
// them agree on authentication.
func checkDuplicates(r *porticov1alpha1.APIRule) error {
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
func checkCoveredRules(p *Plan) error {
	a, b, wb, found := unguardedPair(p, false, func(a, b *Rule) bool {
		return paths.IsPrefix(a.Path) && strings.HasPrefix(b.Path, strings.TrimSuffix(a.Path, "*"))
	})
	if !found {
		return nil
	}
	return fmt.Errorf("rule %s (%s) covers rule %s (%s) on the pods of service %s, which Istio would open to the callers of %s: "+
		"give both the same authentication, disjoint methods, or disjoint paths",
		a.Path, Authentication(a), b.Path, Authentication(b), wb, a.Path)
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

func methodsOverlap(a, b []porticov1alpha1.HTTPMethod) bool {
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

// SameAuthentication reports whether two rules demand the same
// access of a caller: the same external authorizer, the same access and
// the same client addresses.
func SameAuthentication(a, b *Rule) bool {
	if a.Authorizer != b.Authorizer || !a.Clients.Equal(b.Clients) {
		return false
	}
	if a.Access == nil || b.Access == nil {
		return a.Access == nil && b.Access == nil
	}
	return a.Access.Equal(*b.Access)
}

// Authentication describes what a rule demands of a caller; two rules
// demanding the same have the same description.
func Authentication(rule *Rule) string {
	if rule.Clients != nil {
		return authentication(rule) + ", " + rule.Clients.String()
	}
	return authentication(rule)
}

func authentication(rule *Rule) string {
	if rule.Authorizer != "" {
		if rule.Access == nil {
			return "extAuth " + rule.Authorizer
		}
		return "extAuth " + rule.Authorizer + " then " + rule.Access.String()
	}
	if rule.Access == nil {
		return "noAuth"
	}
	return rule.Access.String()
}

// sharedWorkload returns a backend of rule b that may share pods with a
// backend of rule a: a rule with backends serves every one of them, so two
// rules meet on the pods of any pair.
func sharedWorkload(p *Plan, a, b *Rule) (types.NamespacedName, bool) {
	for _, wb := range b.Backends {
		for _, wa := range a.Backends {
			if MayShareWorkload(wa, p.Selectors[wa], wb, p.Selectors[wb]) {
				return wb, true
			}
		}
	}
	return types.NamespacedName{}, false
}

// checkBackends refuses weighted backends that the API server refuses too
// (the controller must not rely on it): with a service, weights that are
// not percentages adding up to 100, and a Service port listed twice, also
// once with and once without the APIRule's namespace.
func checkBackends(r *porticov1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		if len(rule.Backends) == 0 {
			continue
		}
		if rule.Service != nil {
			return fmt.Errorf("rule %s has both service and backends; set one", rule.Path)
		}
		if n := len(rule.Backends); n < minWeightedBackends || n > porticov1alpha1.MaxWeightedBackends {
			return fmt.Errorf("rule %s has %d backends; a rule splits its requests between 2 and %d", rule.Path, n, porticov1alpha1.MaxWeightedBackends)
		}
		var sum int32
		seen := map[porticov1alpha1.ServiceReference]bool{}
		for _, d := range destinationsOf(r, rule) {
			if d.Weight < 0 || d.Weight > 100 {
				return fmt.Errorf("rule %s gives backend %s/%s the weight %d; weights are percentages from 0 to 100", rule.Path, d.Service.Namespace, d.Service.Name, d.Weight)
			}
			if seen[d.Service] {
				return fmt.Errorf("rule %s lists backend %s/%s port %d twice; give it the sum of the weights once", rule.Path, d.Service.Namespace, d.Service.Name, d.Service.Port)
			}
			seen[d.Service] = true
			sum += d.Weight
		}
		if sum != 100 {
			return fmt.Errorf("the weights of rule %s's backends add up to %d; they are percentages of its requests and must add up to 100", rule.Path, sum)
		}
	}
	return nil
}

// checkIssuers rejects an issuer named twice in the APIRule with another
// key set or other token locations: Istio merges the JWT rules of a
// workload, so tokens signed with either key set, or found in either place,
// would pass both rules.
func checkIssuers(r *porticov1alpha1.APIRule) error {
	type seen struct {
		path      string
		jwks      string
		locations []string
	}
	byIssuer := map[string]seen{}
	for _, rule := range r.Spec.Rules {
		token := rule.TokenRequirement()
		if token == nil {
			continue
		}
		for _, iss := range access.IssuersOf(token) {
			locations := access.TokenLocations(iss.FromHeaders, iss.FromParams)
			existing, ok := byIssuer[iss.Issuer]
			if !ok {
				byIssuer[iss.Issuer] = seen{path: rule.Path, jwks: iss.JWKSURI, locations: locations}
				continue
			}
			if existing.jwks != iss.JWKSURI {
				return fmt.Errorf("rules for path %s use issuer %s with jwksUri %s, but the rule for path %s uses %s: one issuer needs one key set",
					rule.Path, iss.Issuer, iss.JWKSURI, existing.path, existing.jwks)
			}
			if !slices.Equal(existing.locations, locations) {
				return fmt.Errorf("rules for path %s read tokens of issuer %s from %s, but the rule for path %s reads them from %s: "+
					"Istio merges the places of an issuer, so both rules would accept tokens from all of them; give the issuer the same fromHeaders and fromParams everywhere",
					rule.Path, iss.Issuer, strings.Join(locations, ", "), existing.path, strings.Join(existing.locations, ", "))
			}
		}
	}
	return nil
}

var (
	matchHeaderName = regexp.MustCompile("^[-a-z0-9!#$&'*+.^_|~]+$")
	matchQueryName  = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	matchQueryExact = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	matchValue      = regexp.MustCompile(`^[ -~]+$`)
)

const (
	maxMatchNameLength  = 128
	maxMatchValueLength = 256
)

// checkMatches refuses the matches the CRD refuses (the controller does
// not rely on the API server) and the regular expressions it cannot check:
// one that RE2 does not compile, or whose program is larger than
// MaxMatchRegexProgram, would make Envoy refuse the gateway's routes.
func checkMatches(r *porticov1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		m := rule.Match
		if m == nil {
			continue
		}
		if len(m.Headers)+len(m.QueryParams) > porticov1alpha1.MaxRuleMatches {
			return fmt.Errorf("rule %s matches %d headers and query parameters, more than %d", rule.Path, len(m.Headers)+len(m.QueryParams), porticov1alpha1.MaxRuleMatches)
		}
		seen := map[string]bool{}
		for _, h := range m.Headers {
			if len(h.Name) > maxMatchNameLength || !matchHeaderName.MatchString(h.Name) || slices.Contains(porticov1alpha1.IgnoredMatchHeaders, h.Name) {
				return fmt.Errorf("rule %s: header match %q must be a lower-case HTTP header name of at most %d characters, other than %s",
					rule.Path, h.Name, maxMatchNameLength, strings.Join(porticov1alpha1.IgnoredMatchHeaders, ", "))
			}
			if err := checkMatchValue(rule.Path, "header "+h.Name, h.Exact, h.Prefix, h.Regex, seen); err != nil {
				return err
			}
		}
		seen = map[string]bool{}
		for _, q := range m.QueryParams {
			if len(q.Name) > maxMatchNameLength || !matchQueryName.MatchString(q.Name) {
				return fmt.Errorf("rule %s: query parameter match %q must be letters, digits and -._~, at most %d characters", rule.Path, q.Name, maxMatchNameLength)
			}
			if q.Prefix != "" {
				return fmt.Errorf("rule %s: query parameter %s cannot be matched by prefix (Istio matches query parameters exactly or by regex)", rule.Path, q.Name)
			}
			if q.Exact != "" && !matchQueryExact.MatchString(q.Exact) {
				return fmt.Errorf("rule %s: query parameter %s: an exact value must be letters, digits and -._~", rule.Path, q.Name)
			}
			if err := checkMatchValue(rule.Path, "query parameter "+q.Name, q.Exact, "", q.Regex, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkMatchValue(path, what, exact, prefix, regex string, seen map[string]bool) error {
	if seen[what] {
		return fmt.Errorf("rule %s matches %s twice", path, what)
	}
	seen[what] = true
	set := 0
	for _, v := range []string{exact, prefix, regex} {
		if v == "" {
			continue
		}
		set++
		if len(v) > maxMatchValueLength || !matchValue.MatchString(v) {
			return fmt.Errorf("rule %s: %s: a value must be 1 to %d printable ASCII characters", path, what, maxMatchValueLength)
		}
	}
	if set != 1 {
		return fmt.Errorf("rule %s: %s needs exactly one of exact, prefix or regex", path, what)
	}
	if regex != "" {
		return checkRegex(path, what, regex)
	}
	return nil
}

// checkRegex compiles a regular expression as RE2 would (Go's regexp
// has RE2's syntax) and bounds its program. Named groups in the (?<name>)
// form, which older RE2 builds refuse, are refused too.
func checkRegex(path, what, regex string) error {
	parsed, err := syntax.Parse(regex, syntax.Perl)
	if err != nil {
		return fmt.Errorf("rule %s: %s: regex %q is not a valid RE2 regular expression: %w", path, what, regex, err)
	}
	if strings.Contains(regex, "(?<") {
		return fmt.Errorf("rule %s: %s: regex %q names a group as (?<name>...), which not every RE2 accepts; use (?P<name>...) or an unnamed group", path, what, regex)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return fmt.Errorf("rule %s: %s: regex %q does not compile: %w", path, what, regex, err)
	}
	if len(prog.Inst) > porticov1alpha1.MaxMatchRegexProgram {
		return fmt.Errorf("rule %s: %s: regex %q compiles to %d instructions, more than %d: Envoy would refuse the gateway's routes; simplify it (fewer or smaller repetitions)",
			path, what, regex, len(prog.Inst), porticov1alpha1.MaxMatchRegexProgram)
	}
	return nil
}

// checkSharedRequests refuses two rules that can match one request (their
// paths meet, a method in common) on pods both may reach, with other
// authentication, whatever their matches: the backend's access policy
// cannot see which route a request took, and Istio adds up the ALLOW
// rules of a workload, so a noAuth rule with "x-admin: yes" on a jwt path
// would open the path to every caller, with or without the header.
// checkCoveredRules has already refused the covering prefixes; this adds
// the rules that share a path, which only matches make possible.
func checkSharedRequests(p *Plan) error {
	a, b, wb, found := unguardedPair(p, true, func(a, b *Rule) bool {
		return paths.PatternsMeet(a.Path, b.Path)
	})
	if !found {
		return nil
	}
	return fmt.Errorf("rules %s%s (%s) and %s%s (%s) can match the same request on the pods of service %s with different authentication: "+
		"a match selects a route, not access (the access policy cannot see headers the client chooses), so both need the same authentication",
		a.Path, matchText(a.Spec), Authentication(a), b.Path, matchText(b.Spec), Authentication(b), wb)
}

// unguardedPair finds the first two rules a and b (every a in order, then
// every other b, or only those after a when laterOnly) whose requests meet
// (meet), with a method in common, on pods both may reach (wb is b's
// backend there), with other authentication: Istio adds up the ALLOW rules
// of a workload, so the callers of one would reach what the other guards.
func unguardedPair(p *Plan, laterOnly bool, meet func(a, b *Rule) bool) (a, b *Rule, wb types.NamespacedName, found bool) {
	for i, a := range p.Rules {
		for j, b := range p.Rules {
			if i == j || (laterOnly && j < i) || !meet(a, b) || !methodsOverlap(a.Spec.Methods, b.Spec.Methods) || SameAuthentication(a, b) {
				continue
			}
			if wb, shared := sharedWorkload(p, a, b); shared {
				return a, b, wb, true
			}
		}
	}
	return nil, nil, wb, false
}

func matchText(rule porticov1alpha1.Rule) string {
	if key := rule.Match.Key(); key != "" {
		return " [" + strings.ReplaceAll(key, "\n", "; ") + "]"
	}
	return ""
}

// checkRequestModifiers repeats the API server's checks of the rules'
// request modifiers (retries, request headers and cookies, rewrites): the
// controller must not rely on admission, whose rules a CRD upgrade or a
// cluster without CEL could miss.
func checkRequestModifiers(r *porticov1alpha1.APIRule) error {
	if err := checkHeaderTotals(r); err != nil {
		return err
	}
	for _, rule := range r.Spec.Rules {
		if err := checkRetries(r, rule); err != nil {
			return err
		}
		if err := checkRequest(rule); err != nil {
			return err
		}
		if err := checkHeaderChanges(rule); err != nil {
			return err
		}
		if err := checkRewrite(rule); err != nil {
			return err
		}
	}
	return nil
}

// checkRetries bounds a rule's retries as the CRD does.
func checkRetries(r *porticov1alpha1.APIRule, rule porticov1alpha1.Rule) error {
	p := rule.Retries
	if p == nil {
		return nil
	}
	if p.Attempts < minRetryAttempts || p.Attempts > maxRetryAttempts {
		return fmt.Errorf("rule %s: retries.attempts must be from %d to %d, not %d", rule.Path, minRetryAttempts, maxRetryAttempts, p.Attempts)
	}
	if len(p.Codes) == 0 && len(p.RetryOn) == 0 {
		return fmt.Errorf("rule %s: retries needs codes, retryOn or both", rule.Path)
	}
	for _, c := range p.RetryOn {
		if !slices.Contains(porticov1alpha1.RetryConditions, c) {
			return fmt.Errorf("rule %s: retry condition %q is not one of %v", rule.Path, c, porticov1alpha1.RetryConditions)
		}
	}
	for _, c := range p.Codes {
		if c < minRetryCode || c > maxRetryCode {
			return fmt.Errorf("rule %s: retry code %d is not from %d to %d", rule.Path, c, minRetryCode, maxRetryCode)
		}
	}
	timeout := rule.Timeout
	if timeout == nil {
		timeout = r.Spec.Timeout
	}
	if p.PerTryTimeout != nil && timeout != nil && p.PerTryTimeout.Duration > timeout.Duration {
		return fmt.Errorf("rule %s: retries.perTryTimeout %s exceeds the timeout %s that bounds all tries", rule.Path, p.PerTryTimeout.Duration, timeout.Duration)
	}
	return nil
}

var (
	headerName     = regexp.MustCompile(`^[-a-z0-9!#$&'*+.^_` + "`" + `|~]{1,64}$`)
	headerValue    = regexp.MustCompile(`^[\x21-\x24\x26-\x7e]([\x20-\x24\x26-\x7e]*[\x21-\x24\x26-\x7e])?$`)
	cookieName     = regexp.MustCompile(`^[-A-Za-z0-9!#$&'*+.^_` + "`" + `|~]{1,64}$`)
	cookieValue    = regexp.MustCompile(`^[\x21\x23\x24\x26-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]{1,256}$`)
	maxHeaders     = 8
	maxHeaderValue = 512
	maxCookies     = 8
)

// ErrForgesRequest marks a refusal of headers or cookies that would be
// sent in the callers' name where the APIRule may not: a reserved header
// (in any spelling), two headers read as one, or any header or cookie on a
// rule routed to another namespace. The controller takes back what the
// APIRule wrote for such a refusal (an APIRule Applied before this check
// existed would otherwise keep its route sending them).
var ErrForgesRequest = errors.New("the APIRule's objects were removed, so that no live route sends them")

// forges is a refusal marked as ErrForgesRequest.
func forges(format string, args ...any) error {
	return fmt.Errorf(format+"; %w", append(args, ErrForgesRequest)...)
}

// checkForgedRequests refuses, before any other check so that the
// controller always takes back a route that sends them (ErrForgesRequest),
// the headers and cookies a rule may not send in its callers' name: a
// header that carries identity, routing or tracing
// (porticov1alpha1.IsReservedRequestHeader) in any spelling a backend
// reads as it, two headers a backend reads as one, and any header or
// cookie on a rule routed to another namespace's Service.
func checkForgedRequests(r *porticov1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		if err := checkForgedRemovals(rule); err != nil {
			return err
		}
		m := rule.Request
		if m == nil {
			continue
		}
		seen := map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			key := porticov1alpha1.NormalizeHeaderName(name)
			if porticov1alpha1.IsReservedRequestHeader(name) {
				return forges("rule %s may not set the header %s, which backends read as %s: it carries the caller's identity, the request's routing or its trace",
					rule.Path, name, key)
			}
			if other, dup := seen[key]; dup {
				return forges("rule %s sets the headers %s and %s, which backends read as one header (%s): which value they see would be undefined; set it once",
					rule.Path, other, name, key)
			}
			seen[key] = name
		}
		if err := checkRequestTargets(r, rule); err != nil {
			return err
		}
	}
	return nil
}

// checkRequest refuses the request headers and cookies the CRD refuses
// (checkForgedRequests has refused those sent in the callers' name).
func checkRequest(rule porticov1alpha1.Rule) error {
	m := rule.Request
	if m == nil {
		return nil
	}
	if len(m.Headers) > maxHeaders || len(m.Cookies) > maxCookies {
		return fmt.Errorf("rule %s sets %d headers and %d cookies; at most %d and %d", rule.Path, len(m.Headers), len(m.Cookies), maxHeaders, maxCookies)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		if v := string(m.Headers[name]); !headerName.MatchString(name) || len(v) > maxHeaderValue || !headerValue.MatchString(v) {
			return fmt.Errorf("rule %s: header %q or its value is not one the APIRule may set (lower-case token name up to 64, printable value up to 512 without '%%')", rule.Path, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Cookies)) {
		if !cookieName.MatchString(name) || !cookieValue.MatchString(string(m.Cookies[name])) {
			return fmt.Errorf("rule %s: cookie %q or its value is not one the APIRule may set (token name up to 64, cookie value up to 256 without '%%')", rule.Path, name)
		}
	}
	return nil
}

// checkRequestTargets refuses request headers and cookies on a rule with a
// backend in another namespace. Whether a header or a cookie carries
// identity is the backend's to say (a session cookie, an x-user its
// authentication proxy sets), and the owner of a Service in another
// namespace cannot read this APIRule to find out what is sent in its
// callers' name; consent to routes is not consent to that. Every backend
// counts, whatever its weight: a weight of 0 is one edit from traffic.
func checkRequestTargets(r *porticov1alpha1.APIRule, rule porticov1alpha1.Rule) error {
	m := rule.Request
	if m == nil || len(m.Headers)+len(m.Cookies) == 0 {
		return nil
	}
	for _, b := range backendsOf(r, rule) {
		if b.Namespace != r.Namespace {
			return forges("rule %s sets request headers or cookies, but routes to service %s of another namespace, "+
				"whose owner cannot read this APIRule to see what is sent to it in its callers' name; "+
				"set request headers and cookies only on rules whose every backend is a Service of namespace %s",
				rule.Path, b, r.Namespace)
		}
	}
	return nil
}

var rewritePath = regexp.MustCompile(`^/[-a-zA-Z0-9._~!$&()+,;=:@/]*$`)

// checkRewrite refuses the rewrites the CRD refuses: above all any '*',
// '%' or dot segment, with which the path the backend's access policy
// sees would not be the one written in it.
func checkRewrite(rule porticov1alpha1.Rule) error {
	rw := rule.Rewrite
	if rw == nil {
		return nil
	}
	if (rw.Path == "") == (rw.Prefix == "") {
		return fmt.Errorf("rule %s: rewrite needs exactly one of path or prefix", rule.Path)
	}
	target := string(rw.Path + rw.Prefix)
	if len(target) > maxRewriteLength || !rewritePath.MatchString(target) ||
		strings.Contains(target, "//") || strings.Contains(target, "/./") || strings.Contains(target, "/../") ||
		strings.HasSuffix(target, "/.") || strings.HasSuffix(target, "/..") {
		return fmt.Errorf("rule %s: rewrite %s must be a path of URL path characters without '*', '%%' or dot segments", rule.Path, target)
	}
	if rw.Prefix != "" && (!paths.IsPrefix(rule.Path) || !strings.HasSuffix(target, "/")) {
		return fmt.Errorf("rule %s: rewrite.prefix %s needs a prefix rule and must end with '/'", rule.Path, target)
	}
	return nil
}

// checkRewriteTargets refuses a rewrite whose requests reach, on pods
// another rule may reach too, a path that rule allows to other callers.
// The backend's AuthorizationPolicy sees the rewritten path, and Istio
// adds up ALLOW rules: a noAuth "/public/*" rewritten to "/admin/" would
// open the "/admin/*" a jwt rule guards, to anyone, whichever route the
// request took. Rules without rewrites are checkCoveredRules's.
func checkRewriteTargets(p *Plan) error {
	a, b, wb, found := unguardedPair(p, false, func(a, b *Rule) bool {
		return a.Rewrite != nil && paths.PatternsMeet(a.BackendPath, b.BackendPath)
	})
	if !found {
		return nil
	}
	return fmt.Errorf("rule %s (%s) rewrites to %s, which meets %s that rule %s (%s) allows on the pods of service %s: "+
		"the backend's access policy sees the rewritten path, so the callers of %s would reach it; "+
		"give both the same authentication, disjoint methods, or rewrite elsewhere",
		a.Path, Authentication(a), a.BackendPath, b.BackendPath, b.Path, Authentication(b), wb, a.Path)
}

// checkTemplateOverlaps refuses a template rule whose path meets another
// rule's, with a method in common, on pods both may reach, with other
// authentication: Istio adds up ALLOW rules, so a noAuth "/orders/{*}"
// would open the "/orders/admin" a jwt rule guards. checkCoveredRules
// covers prefix rules; the API server cannot compare templates.
func checkTemplateOverlaps(p *Plan) error {
	a, b, wb, found := unguardedPair(p, false, func(a, b *Rule) bool {
		return paths.IsTemplate(a.Path) && paths.Meet(a.Path, b.Path)
	})
	if !found {
		return nil
	}
	return fmt.Errorf("rule %s (%s) meets rule %s (%s) on the pods of service %s: a path both match would be open to the callers of either, "+
		"since Istio adds up access rules: give both the same authentication, disjoint methods, or disjoint paths",
		a.Path, Authentication(a), b.Path, Authentication(b), wb)
}

// checkTemplateRoutes refuses, in HTTPRoute mode, a template rule that
// meets a prefix or another template rule with a method in common. The
// route is a RegularExpression match, whose precedence the Gateway API
// leaves to the implementation (Istio ranks every prefix above every
// regular expression), so which rule serves such a request could differ
// from the VirtualService's order (exact, template, prefix). Exact paths
// win in both.
func checkTemplateRoutes(r *porticov1alpha1.APIRule) error {
	for i, a := range r.Spec.Rules {
		if !paths.IsTemplate(a.Path) {
			continue
		}
		for j, b := range r.Spec.Rules {
			if i == j || paths.Rank(b.Path) == 0 || !paths.Meet(a.Path, b.Path) || !methodsOverlap(a.Methods, b.Methods) {
				continue
			}
			return fmt.Errorf("rules %s and %s can match the same request with a method in common; with parentRef which one serves it "+
				"is up to the Gateway API implementation: make the paths or methods disjoint", a.Path, b.Path)
		}
	}
	return nil
}

// checkAuthorizers rejects what Istio cannot enforce: two authorizers on
// pods that rules of the APIRule may share (Istio calls a single extension
// provider per workload for CUSTOM policies), and an extAuth rule routed
// to another namespace's Service, where the APIRule writes no access
// policy, so the authorizer would never be asked.
func checkAuthorizers(p *Plan) error {
	ns := p.APIRule.Namespace
	for i, a := range p.Rules {
		if a.Authorizer == "" {
			continue
		}
		for _, wa := range a.Backends {
			if wa.Namespace == ns {
				continue
			}
			return fmt.Errorf("rule %s hands its requests to authorizer %s, but routes to service %s of another namespace, "+
				"where the APIRule writes no access policy: the authorizer would never be asked; route to a Service of namespace %s, "+
				"or let the Service's own namespace set its access policies", a.Path, a.Authorizer, wa, ns)
		}
		for _, b := range p.Rules[i+1:] {
			if b.Authorizer == "" || b.Authorizer == a.Authorizer {
				continue
			}
			if wb, shared := sharedWorkload(p, a, b); shared {
				return fmt.Errorf("rules %s and %s hand requests to authorizers %s and %s on pods they may share (those of service %s): "+
					"Istio calls one external authorizer per workload; use the same authorizer for both",
					a.Path, b.Path, a.Authorizer, b.Authorizer, wb)
			}
		}
	}
	return nil
}

// checkHTTPRoute refuses what an HTTPRoute cannot say as the APIRule means
// it; the API server's checks of the HTTPRoute (its CRD's) come after.
func checkHTTPRoute(r *porticov1alpha1.APIRule) error {
	if len(r.Spec.Rules) > porticov1alpha1.MaxHTTPRouteRules {
		return fmt.Errorf("an APIRule with parentRef has at most %d rules (one HTTPRoute's), not %d", porticov1alpha1.MaxHTTPRouteRules, len(r.Spec.Rules))
	}
	for _, rule := range r.Spec.Rules {
		if rule.Retries != nil {
			return fmt.Errorf("rule %s has retries, which need Istio mode: the HTTPRoute's retry field is in the Gateway API's experimental channel only", rule.Path)
		}
		// The Gateway API refuses these in Exact and PathPrefix matches.
		for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F", "#"} {
			if strings.Contains(rule.Path, bad) {
				return fmt.Errorf("path %s contains %q, which a Gateway API path match may not", rule.Path, bad)
			}
		}
		if strings.HasSuffix(strings.TrimSuffix(rule.Path, "/*"), "/.") || strings.HasSuffix(strings.TrimSuffix(rule.Path, "/*"), "/..") {
			return fmt.Errorf("path %s ends with a dot segment, which a Gateway API path match may not", rule.Path)
		}
	}
	if c := r.Spec.CORS; c != nil {
		for _, o := range c.AllowOrigins {
			// Istio's origins are exact; the Gateway API reads "*" inside
			// an origin as a wildcard: the same text would allow more.
			if o != "*" && strings.Contains(o, "*") {
				return fmt.Errorf("cors origin %s has a '*' that the Gateway API would read as a wildcard; list the origins", o)
			}
		}
	}
	return nil
}
