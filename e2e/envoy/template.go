package envoy

import (
	"fmt"
	"regexp"
	"strings"
)

// Envoy's uri_template grammar (envoy.path.match.uri_template and
// envoy.path.rewrite.uri_template): a template is "/"-separated segments;
// "*" matches one non-empty segment, "**" the rest of the path (it may only
// come last), "{name}" or "{name=*}" binds one segment, "{name=**}" binds
// the rest, "{name=a/*}" binds a literal and operator sequence; anything
// else is literal. The characters a segment may hold are pchar's.
const (
	segmentChars = `[a-zA-Z0-9\-._~%!$&'()+,;:@=]`
	oneSegment   = segmentChars + `+`
	restOfPath   = `(?:` + segmentChars + `|/)*`
)

// uriTemplate is a compiled match template: its regex and the names of its
// variables in the order of their groups.
type uriTemplate struct {
	re        *regexp.Regexp
	variables []string
}

var templateVariable = regexp.MustCompile(`^\{([a-zA-Z][a-zA-Z0-9_]*)(?:=([^{}]*))?\}`)

// compileTemplate turns a match template into a regex that matches the
// whole path.
func compileTemplate(template string) (*uriTemplate, error) {
	if !strings.HasPrefix(template, "/") {
		return nil, fmt.Errorf("uri template %q does not start with /", template)
	}
	var b strings.Builder
	t := &uriTemplate{}
	rest := template
	sawRest := false
	for rest != "" {
		if sawRest {
			// Only a literal suffix may follow "**" (e.g. "{f=**}.ts").
			if strings.ContainsAny(rest, "*{}/") {
				return nil, fmt.Errorf("uri template %q: ** must be the last operator", template)
			}
		}
		switch {
		case strings.HasPrefix(rest, "**"):
			b.WriteString(restOfPath)
			rest, sawRest = rest[2:], true
		case strings.HasPrefix(rest, "*"):
			b.WriteString(oneSegment)
			rest = rest[1:]
		case strings.HasPrefix(rest, "{"):
			m := templateVariable.FindStringSubmatch(rest)
			if m == nil {
				return nil, fmt.Errorf("uri template %q: malformed variable at %q", template, rest)
			}
			inner := m[2]
			if inner == "" {
				inner = "*"
			}
			sub, err := variableExpr(inner)
			if err != nil {
				return nil, fmt.Errorf("uri template %q: %w", template, err)
			}
			if strings.Contains(inner, "**") {
				sawRest = true
			}
			b.WriteString("(" + sub + ")")
			t.variables = append(t.variables, m[1])
			rest = rest[len(m[0]):]
		default:
			i := strings.IndexAny(rest, "*{")
			if i < 0 {
				i = len(rest)
			}
			if strings.ContainsAny(rest[:i], "}") {
				return nil, fmt.Errorf("uri template %q: stray }", template)
			}
			b.WriteString(regexp.QuoteMeta(rest[:i]))
			rest = rest[i:]
		}
	}
	re, err := regexp.Compile("^" + b.String() + "$")
	if err != nil {
		return nil, err
	}
	t.re = re
	return t, nil
}

// variableExpr is the regex of a variable's pattern: operators and
// literal segments.
func variableExpr(pattern string) (string, error) {
	parts := strings.Split(pattern, "/")
	out := make([]string, len(parts))
	for i, p := range parts {
		switch {
		case p == "**" && i == len(parts)-1:
			out[i] = restOfPath
		case p == "*":
			out[i] = oneSegment
		case p == "" || strings.ContainsAny(p, "*{}"):
			return "", fmt.Errorf("variable pattern %q is not modelled", pattern)
		default:
			out[i] = regexp.QuoteMeta(p)
		}
	}
	return strings.Join(out, "/"), nil
}

// URITemplateMatches is Envoy's uri_template path match.
func URITemplateMatches(template, path string) (bool, error) {
	t, err := compileTemplate(template)
	if err != nil {
		return false, err
	}
	return t.re.MatchString(path), nil
}

// URITemplateRewrite rewrites path, which matched the match template, by
// the rewrite template: each "{name}" is replaced by what the variable of
// that name bound; a rewrite naming a variable the match does not bind is
// an error (Envoy refuses such a route).
func URITemplateRewrite(matchTemplate, rewriteTemplate, path string) (string, error) {
	t, err := compileTemplate(matchTemplate)
	if err != nil {
		return "", err
	}
	groups := t.re.FindStringSubmatch(path)
	if groups == nil {
		return "", fmt.Errorf("path %q does not match uri template %q", path, matchTemplate)
	}
	bound := map[string]string{}
	for i, name := range t.variables {
		bound[name] = groups[i+1]
	}
	var b strings.Builder
	rest := rewriteTemplate
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("rewrite template %q: unclosed {", rewriteTemplate)
		}
		name := rest[i+1 : i+j]
		value, ok := bound[name]
		if !ok {
			return "", fmt.Errorf("rewrite template %q names %q, which %q does not bind", rewriteTemplate, name, matchTemplate)
		}
		b.WriteString(value)
		rest = rest[i+j+1:]
	}
	return b.String(), nil
}
