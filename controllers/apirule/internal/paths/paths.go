package paths

import (
	"fmt"
	"regexp"
	"strings"
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

// Rank orders the kinds of paths as routes are tried: exact paths,
// then templates, then prefixes.
func Rank(path string) int {
	switch {
	case IsTemplate(path):
		return 1
	case IsPrefix(path):
		return 2
	}
	return 0
}

// IsTemplate reports whether a path holds a template operator.
func IsTemplate(path string) bool {
	return strings.Contains(path, segmentOperator) || strings.Contains(path, restOperator)
}

// CheckTemplate repeats the API server's checks of a template path.
func CheckTemplate(path string) error {
	if !templatePath.MatchString(path) || strings.HasSuffix(path, "/*") {
		return fmt.Errorf("path %q: '{*}' and '{**}' must be whole segments, '{**}' only the last, and a template may not end with '/*'", path)
	}
	return nil
}

// Regex is the RE2 expression a route matches a template path
// with: "{*}" one non-empty segment, "{**}" anything after its '/'.
func Regex(path string) string {
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
	case IsTemplate(p):
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

// Meet reports whether two path patterns in the AuthorizationPolicy's
// syntax (exact, "x*" prefix, "*x" suffix, "*", or a template with "{*}"
// and a final "{**}") match a common path. Rule paths are in that syntax
// too ("/orders/*" is the prefix "/orders/").
func Meet(a, b string) bool {
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

// IsPrefix reports whether a path is a prefix rule's ("/orders/*").
func IsPrefix(path string) bool { return strings.HasSuffix(path, "/*") }

// PatternsMeet reports whether two rule path patterns (exact, a
// prefix "/x/*", or a template) match a common path.
func PatternsMeet(p, q string) bool {
	if IsTemplate(p) || IsTemplate(q) {
		return Meet(p, q)
	}
	pp, qp := IsPrefix(p), IsPrefix(q)
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
