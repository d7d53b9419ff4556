package translate

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// checkRequestModifiers repeats the API server's checks of the rules'
// request modifiers (retries, request headers and cookies, rewrites): the
// controller must not rely on admission, whose rules a CRD upgrade or a
// cluster without CEL could miss.
func checkRequestModifiers(r *gatewayv1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		if err := checkRetries(r, rule); err != nil {
			return err
		}
		if err := checkRequest(rule); err != nil {
			return err
		}
		if err := checkRewrite(rule); err != nil {
			return err
		}
	}
	return nil
}

// checkRetries bounds a rule's retries as the CRD does.
func checkRetries(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) error {
	p := rule.Retries
	if p == nil {
		return nil
	}
	if p.Attempts < 1 || p.Attempts > 10 {
		return fmt.Errorf("rule %s: retries.attempts must be from 1 to 10, not %d", rule.Path, p.Attempts)
	}
	if len(p.Codes) == 0 && len(p.RetryOn) == 0 {
		return fmt.Errorf("rule %s: retries needs codes, retryOn or both", rule.Path)
	}
	for _, c := range p.RetryOn {
		if !slices.Contains(gatewayv1alpha1.RetryConditions, c) {
			return fmt.Errorf("rule %s: retry condition %q is not one of %v", rule.Path, c, gatewayv1alpha1.RetryConditions)
		}
	}
	for _, c := range p.Codes {
		if c < 400 || c > 599 {
			return fmt.Errorf("rule %s: retry code %d is not from 400 to 599", rule.Path, c)
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
	cookieHeader   = "cookie"
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
// (gatewayv1alpha1.IsReservedRequestHeader) in any spelling a backend
// reads as it, two headers a backend reads as one, and any header or
// cookie on a rule routed to another namespace's Service.
func checkForgedRequests(r *gatewayv1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		m := rule.Request
		if m == nil {
			continue
		}
		seen := map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			key := gatewayv1alpha1.NormalizeHeaderName(name)
			if gatewayv1alpha1.IsReservedRequestHeader(name) {
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
func checkRequest(rule gatewayv1alpha1.Rule) error {
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
func checkRequestTargets(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) error {
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

// requestHeaders are the headers a rule sets, sorted by name: its headers
// and, for its cookies, one cookie header ("a=1; b=2", sorted by name)
// that replaces the client's.
func requestHeaders(rule gatewayv1alpha1.Rule) [][2]string {
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

var rewritePath = regexp.MustCompile(`^/[-a-zA-Z0-9._~!$&()+,;=:@/]*$`)

// checkRewrite refuses the rewrites the CRD refuses: above all any '*',
// '%' or dot segment, with which the path the backend's access policy
// sees would not be the one written in it.
func checkRewrite(rule gatewayv1alpha1.Rule) error {
	rw := rule.Rewrite
	if rw == nil {
		return nil
	}
	if (rw.Path == "") == (rw.Prefix == "") {
		return fmt.Errorf("rule %s: rewrite needs exactly one of path or prefix", rule.Path)
	}
	target := string(rw.Path + rw.Prefix)
	if len(target) > 256 || !rewritePath.MatchString(target) ||
		strings.Contains(target, "//") || strings.Contains(target, "/./") || strings.Contains(target, "/../") ||
		strings.HasSuffix(target, "/.") || strings.HasSuffix(target, "/..") {
		return fmt.Errorf("rule %s: rewrite %s must be a path of URL path characters without '*', '%%' or dot segments", rule.Path, target)
	}
	if rw.Prefix != "" && (!isPrefix(rule.Path) || !strings.HasSuffix(target, "/")) {
		return fmt.Errorf("rule %s: rewrite.prefix %s needs a prefix rule and must end with '/'", rule.Path, target)
	}
	return nil
}

// BackendPath is the path pattern a rule's requests have when they reach
// the backend, in the AuthorizationPolicy's syntax: the rule's path, or
// what its rewrite makes of it (rewrite.path exactly, rewrite.prefix
// followed by anything).
func BackendPath(rule gatewayv1alpha1.Rule) string {
	switch rw := rule.Rewrite; {
	case rw == nil:
		return rule.Path
	case rw.Path != "":
		return string(rw.Path)
	default:
		return string(rw.Prefix) + "*"
	}
}

// pathPatternsMeet reports whether two rule path patterns (exact, a
// prefix "/x/*", or a template) match a common path.
func pathPatternsMeet(p, q string) bool {
	if isTemplate(p) || isTemplate(q) {
		return pathsMeet(p, q)
	}
	pp, qp := isPrefix(p), isPrefix(q)
	p, q = strings.TrimSuffix(p, "*"), strings.TrimSuffix(q, "*")
	switch {
	case pp && qp:
		return strings.HasPrefix(p, q) || strings.HasPrefix(q, p)
	case pp:
		return strings.HasPrefix(q, p)
	case qp:
		return strings.HasPrefix(p, q)
	default:
		return p == q
	}
}

// checkRewriteTargets refuses a rewrite whose requests reach, on pods
// another rule may reach too, a path that rule allows to other callers.
// The backend's AuthorizationPolicy sees the rewritten path, and Istio
// adds up ALLOW rules: a noAuth "/public/*" rewritten to "/admin/" would
// open the "/admin/*" a jwt rule guards, to anyone, whichever route the
// request took. Rules without rewrites are checkCoveredRules's.
func checkRewriteTargets(r *gatewayv1alpha1.APIRule, selectors map[types.NamespacedName]map[string]string) error {
	for i, a := range r.Spec.Rules {
		if a.Rewrite == nil {
			continue
		}
		for j, b := range r.Spec.Rules {
			if i == j || !pathPatternsMeet(BackendPath(a), BackendPath(b)) || !methodsOverlap(a.Methods, b.Methods) || sameAuthentication(a, b) {
				continue
			}
			wb, shared := sharedWorkload(r, a, b, selectors)
			if !shared {
				continue
			}
			return fmt.Errorf("rule %s (%s) rewrites to %s, which meets %s that rule %s (%s) allows on the pods of service %s: "+
				"the backend's access policy sees the rewritten path, so the callers of %s would reach it; "+
				"give both the same authentication, disjoint methods, or rewrite elsewhere",
				a.Path, authentication(a), BackendPath(a), BackendPath(b), b.Path, authentication(b), wb, a.Path)
		}
	}
	return nil
}
