package translate

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Header and query-parameter matches (issue 32). A match selects a route,
// never access: the backend's AuthorizationPolicy gets no condition on the
// matched headers, because the client chooses its headers and query
// parameters, and a policy that required "x-admin: yes" would open the
// path to anyone who sends it. So checkSharedRequests demands the same
// authentication of every two rules that can match one request on the
// same pods, whatever their matches.

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
func checkMatches(r *gatewayv1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		m := rule.Match
		if m == nil {
			continue
		}
		if len(m.Headers)+len(m.QueryParams) > gatewayv1alpha1.MaxRuleMatches {
			return fmt.Errorf("rule %s matches %d headers and query parameters, more than %d", rule.Path, len(m.Headers)+len(m.QueryParams), gatewayv1alpha1.MaxRuleMatches)
		}
		seen := map[string]bool{}
		for _, h := range m.Headers {
			if len(h.Name) > maxMatchNameLength || !matchHeaderName.MatchString(h.Name) || slices.Contains(gatewayv1alpha1.IgnoredMatchHeaders, h.Name) {
				return fmt.Errorf("rule %s: header match %q must be a lower-case HTTP header name of at most %d characters, other than %s",
					rule.Path, h.Name, maxMatchNameLength, strings.Join(gatewayv1alpha1.IgnoredMatchHeaders, ", "))
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
	if len(prog.Inst) > gatewayv1alpha1.MaxMatchRegexProgram {
		return fmt.Errorf("rule %s: %s: regex %q compiles to %d instructions, more than %d: Envoy would refuse the gateway's routes; simplify it (fewer or smaller repetitions)",
			path, what, regex, len(prog.Inst), gatewayv1alpha1.MaxMatchRegexProgram)
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
func checkSharedRequests(r *gatewayv1alpha1.APIRule, selectors map[types.NamespacedName]map[string]string) error {
	for i, a := range r.Spec.Rules {
		for _, b := range r.Spec.Rules[i+1:] {
			if !pathPatternsMeet(a.Path, b.Path) || !methodsOverlap(a.Methods, b.Methods) || sameAuthentication(a, b) {
				continue
			}
			wb, shared := sharedWorkload(r, a, b, selectors)
			if !shared {
				continue
			}
			return fmt.Errorf("rules %s%s (%s) and %s%s (%s) can match the same request on the pods of service %s with different authentication: "+
				"a match selects a route, not access (the access policy cannot see headers the client chooses), so both need the same authentication",
				a.Path, matchText(a), authentication(a), b.Path, matchText(b), authentication(b), wb)
		}
	}
	return nil
}

func matchText(rule gatewayv1alpha1.Rule) string {
	if key := rule.Match.Key(); key != "" {
		return " [" + strings.ReplaceAll(key, "\n", "; ") + "]"
	}
	return ""
}

func matchCounts(rule gatewayv1alpha1.Rule) (headers, queryParams int) {
	if rule.Match == nil {
		return 0, 0
	}
	return len(rule.Match.Headers), len(rule.Match.QueryParams)
}

// morePreciseMatch orders two rules of the same path kind and length the
// way the Gateway API ranks matches: a rule with methods, then more header
// matches, then more query-parameter matches first. It returns 0 on a tie.
func morePreciseMatch(a, b gatewayv1alpha1.Rule) int {
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

// istioStringMatch is one value match as Istio's StringMatch.
func istioStringMatch(exact, prefix, regex string) *networkingv1alpha3.StringMatch {
	switch {
	case exact != "":
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Exact{Exact: exact}}
	case prefix != "":
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Prefix{Prefix: prefix}}
	default:
		return &networkingv1alpha3.StringMatch{MatchType: &networkingv1alpha3.StringMatch_Regex{Regex: regex}}
	}
}

// addIstioMatches puts a rule's header and query-parameter matches into
// its VirtualService match.
func addIstioMatches(rule gatewayv1alpha1.Rule, match *networkingv1alpha3.HTTPMatchRequest) {
	if rule.Match == nil {
		return
	}
	for _, h := range rule.Match.Headers {
		if match.Headers == nil {
			match.Headers = map[string]*networkingv1alpha3.StringMatch{}
		}
		match.Headers[h.Name] = istioStringMatch(h.Exact, h.Prefix, h.Regex)
	}
	for _, q := range rule.Match.QueryParams {
		if match.QueryParams == nil {
			match.QueryParams = map[string]*networkingv1alpha3.StringMatch{}
		}
		match.QueryParams[q.Name] = istioStringMatch(q.Exact, "", q.Regex)
	}
}

// gatewayValueMatch is one value match as the Gateway API's: Exact, or a
// RegularExpression, which for a prefix is the quoted prefix followed by
// ".*" (Envoy matches the whole value, as Istio's prefix does its start).
func gatewayValueMatch(exact, prefix, regex string) (exactMatch bool, value string) {
	switch {
	case exact != "":
		return true, exact
	case prefix != "":
		return false, regexp.QuoteMeta(prefix) + ".*"
	default:
		return false, regex
	}
}

// addGatewayMatches puts a rule's header and query-parameter matches,
// sorted by name, into its HTTPRoute match.
func addGatewayMatches(rule gatewayv1alpha1.Rule, match *gatewayapiv1.HTTPRouteMatch) {
	if rule.Match == nil {
		return
	}
	headers := slices.Clone(rule.Match.Headers)
	slices.SortFunc(headers, func(a, b gatewayv1alpha1.RuleHeaderMatch) int { return strings.Compare(a.Name, b.Name) })
	for _, h := range headers {
		exact, value := gatewayValueMatch(h.Exact, h.Prefix, h.Regex)
		kind := gatewayapiv1.HeaderMatchRegularExpression
		if exact {
			kind = gatewayapiv1.HeaderMatchExact
		}
		match.Headers = append(match.Headers, gatewayapiv1.HTTPHeaderMatch{Type: ptr.To(kind), Name: gatewayapiv1.HTTPHeaderName(h.Name), Value: value})
	}
	params := slices.Clone(rule.Match.QueryParams)
	slices.SortFunc(params, func(a, b gatewayv1alpha1.RuleQueryParamMatch) int { return strings.Compare(a.Name, b.Name) })
	for _, q := range params {
		exact, value := gatewayValueMatch(q.Exact, "", q.Regex)
		kind := gatewayapiv1.QueryParamMatchRegularExpression
		if exact {
			kind = gatewayapiv1.QueryParamMatchExact
		}
		match.QueryParams = append(match.QueryParams, gatewayapiv1.HTTPQueryParamMatch{Type: ptr.To(kind), Name: gatewayapiv1.HTTPHeaderName(q.Name), Value: value})
	}
}
