package translate

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Path templates (issue 32): "{*}" is one non-empty path segment, "{**}"
// the rest of the path and only as the last segment, as in Istio's
// AuthorizationPolicy paths (Envoy's URI templates). The access policy
// keeps the template as written; the routes match a regular expression.

const (
	segmentOperator = "{*}"
	restOperator    = "{**}"
)

// templatePath is a rule path the API server admits: URL path characters,
// with "{*}" as whole segments and an optional final "/*" or "/{**}".
var templatePath = regexp.MustCompile(`^(/([-a-zA-Z0-9._~%!$&()+,;=:@]*|\{\*\}))*(/\*|/\{\*\*\})?$`)

// pathRank orders the kinds of paths as routes are tried: exact paths,
// then templates, then prefixes.
func pathRank(path string) int {
	switch {
	case isTemplate(path):
		return 1
	case isPrefix(path):
		return 2
	}
	return 0
}

// isTemplate reports whether a path holds a template operator.
func isTemplate(path string) bool {
	return strings.Contains(path, segmentOperator) || strings.Contains(path, restOperator)
}

// checkTemplate repeats the API server's checks of a template path.
func checkTemplate(path string) error {
	if !templatePath.MatchString(path) || strings.HasSuffix(path, "/*") {
		return fmt.Errorf("path %q: '{*}' and '{**}' must be whole segments, '{**}' only the last, and a template may not end with '/*'", path)
	}
	return nil
}

// templateRegex is the RE2 expression a route matches a template path
// with: "{*}" one non-empty segment, "{**}" anything after its '/'.
func templateRegex(path string) string {
	var b strings.Builder
	b.WriteString("^")
	for _, seg := range strings.Split(path, "/")[1:] {
		b.WriteString("/")
		switch seg {
		case segmentOperator:
			b.WriteString("[^/]+")
		case restOperator:
			b.WriteString(".*")
		default:
			b.WriteString(regexp.QuoteMeta(seg))
		}
	}
	b.WriteString("$")
	return b.String()
}

// pathElement is one step of a path pattern: a literal byte, one or more
// bytes other than '/' ("{*}"), or any bytes, none included ("*", "{**}").
type pathElement struct {
	kind    byte // 'l' literal, 's' segment, 'a' any
	literal byte
}

// pathAlternatives reads a path pattern in the AuthorizationPolicy's
// syntax (exact, "x*" prefix, "*x" suffix, "*", or a template) as one or
// more sequences of elements. "/x/{**}" is read as also matching "/x":
// Envoy's templates do not, but taking more paths as meeting can only find
// more conflicts.
func pathAlternatives(p string) [][]pathElement {
	literals := func(s string) []pathElement {
		out := make([]pathElement, len(s))
		for i := range len(s) {
			out[i] = pathElement{kind: 'l', literal: s[i]}
		}
		return out
	}
	anything := pathElement{kind: 'a'}
	switch {
	case p == "*":
		return [][]pathElement{{anything}}
	case isTemplate(p):
		var elems []pathElement
		rest := strings.HasSuffix(p, "/"+restOperator)
		body := strings.TrimSuffix(p, "/"+restOperator)
		for len(body) > 0 {
			if strings.HasPrefix(body, segmentOperator) {
				elems = append(elems, pathElement{kind: 's'})
				body = body[len(segmentOperator):]
				continue
			}
			elems = append(elems, pathElement{kind: 'l', literal: body[0]})
			body = body[1:]
		}
		if !rest {
			return [][]pathElement{elems}
		}
		withRest := append(append(append([]pathElement{}, elems...), literals("/")...), anything)
		return [][]pathElement{elems, withRest}
	case strings.HasPrefix(p, "*"):
		return [][]pathElement{append([]pathElement{anything}, literals(p[1:])...)}
	case strings.HasSuffix(p, "*"):
		return [][]pathElement{append(literals(p[:len(p)-1]), anything)}
	}
	return [][]pathElement{literals(p)}
}

// pathsMeet reports whether two path patterns in the AuthorizationPolicy's
// syntax (exact, "x*" prefix, "*x" suffix, "*", or a template with "{*}"
// and a final "{**}") match a common path. Rule paths are in that syntax
// too ("/orders/*" is the prefix "/orders/").
func pathsMeet(a, b string) bool {
	for _, ea := range pathAlternatives(a) {
		for _, eb := range pathAlternatives(b) {
			if elementsMeet(ea, eb) {
				return true
			}
		}
	}
	return false
}

// patternState is a position in a pattern; inSegment says that a "{*}"
// at that position has matched a byte already and may end.
type patternState struct {
	at        int
	inSegment bool
}

// elementsMeet searches the product of the two patterns' automata for a
// path both accept.
func elementsMeet(a, b []pathElement) bool {
	type pair struct{ a, b patternState }
	seen := map[pair]bool{}
	queue := []pair{{}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		// Steps that read nothing: leave an "any", or end a segment that
		// has read a byte.
		for _, na := range emptySteps(a, p.a) {
			queue = append(queue, pair{na, p.b})
		}
		for _, nb := range emptySteps(b, p.b) {
			queue = append(queue, pair{p.a, nb})
		}
		if p.a.at == len(a) && p.b.at == len(b) && !p.a.inSegment && !p.b.inSegment {
			return true
		}
		if p.a.at == len(a) || p.b.at == len(b) {
			continue
		}
		ea, eb := a[p.a.at], b[p.b.at]
		if !bytesMeet(ea, eb) {
			continue
		}
		queue = append(queue, pair{readStep(ea, p.a), readStep(eb, p.b)})
	}
	return false
}

func emptySteps(elems []pathElement, s patternState) []patternState {
	if s.at == len(elems) {
		return nil
	}
	switch e := elems[s.at]; {
	case e.kind == 'a':
		return []patternState{{at: s.at + 1}}
	case e.kind == 's' && s.inSegment:
		return []patternState{{at: s.at + 1}}
	}
	return nil
}

// readStep is where a pattern is after its element e has read a byte.
func readStep(e pathElement, s patternState) patternState {
	switch e.kind {
	case 'l':
		return patternState{at: s.at + 1}
	case 's':
		return patternState{at: s.at, inSegment: true}
	}
	return s
}

// bytesMeet reports whether some byte satisfies both elements.
func bytesMeet(a, b pathElement) bool {
	switch {
	case a.kind == 'l' && b.kind == 'l':
		return a.literal == b.literal
	case a.kind == 'l' && b.kind == 's':
		return a.literal != '/'
	case a.kind == 's' && b.kind == 'l':
		return b.literal != '/'
	}
	return true
}

// checkTemplateOverlaps refuses a template rule whose path meets another
// rule's, with a method in common, on pods both may reach, with other
// authentication: Istio adds up ALLOW rules, so a noAuth "/orders/{*}"
// would open the "/orders/admin" a jwt rule guards. checkCoveredRules
// covers prefix rules; the API server cannot compare templates.
func checkTemplateOverlaps(r *gatewayv1alpha1.APIRule, selectors map[types.NamespacedName]map[string]string) error {
	for i, a := range r.Spec.Rules {
		if !isTemplate(a.Path) {
			continue
		}
		for j, b := range r.Spec.Rules {
			if i == j || !pathsMeet(a.Path, b.Path) || !methodsOverlap(a.Methods, b.Methods) || sameAuthentication(a, b) {
				continue
			}
			wb, shared := sharedWorkload(r, a, b, selectors)
			if !shared {
				continue
			}
			return fmt.Errorf("rule %s (%s) meets rule %s (%s) on the pods of service %s: a path both match would be open to the callers of either, "+
				"since Istio adds up access rules: give both the same authentication, disjoint methods, or disjoint paths",
				a.Path, authentication(a), b.Path, authentication(b), wb)
		}
	}
	return nil
}

// checkTemplateRoutes refuses, in HTTPRoute mode, a template rule that
// meets a prefix or another template rule with a method in common. The
// route is a RegularExpression match, whose precedence the Gateway API
// leaves to the implementation (Istio ranks every prefix above every
// regular expression), so which rule serves such a request could differ
// from the VirtualService's order (exact, template, prefix). Exact paths
// win in both.
func checkTemplateRoutes(r *gatewayv1alpha1.APIRule) error {
	for i, a := range r.Spec.Rules {
		if !isTemplate(a.Path) {
			continue
		}
		for j, b := range r.Spec.Rules {
			if i == j || pathRank(b.Path) == 0 || !pathsMeet(a.Path, b.Path) || !methodsOverlap(a.Methods, b.Methods) {
				continue
			}
			return fmt.Errorf("rules %s and %s can match the same request with a method in common; with parentRef which one serves it "+
				"is up to the Gateway API implementation: make the paths or methods disjoint", a.Path, b.Path)
		}
	}
	return nil
}
