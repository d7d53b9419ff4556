package envoy

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// compiled caches the regular expressions of the configuration.
var compiled sync.Map

// compile is Envoy's safe_regex: RE2; whole is whether it must match the
// whole value (matchers) rather than find a part (rewrites).
func compile(re string, whole bool) (*regexp.Regexp, error) {
	key := fmt.Sprintf("%t/%s", whole, re)
	if c, ok := compiled.Load(key); ok {
		return c.(*regexp.Regexp), nil
	}
	expr := re
	if whole {
		expr = "^(?:" + re + ")$"
	}
	c, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", re, err)
	}
	compiled.Store(key, c)
	return c, nil
}

// fullMatch reports whether the regex matches the whole value.
func fullMatch(re, value string) (bool, error) {
	c, err := compile(re, true)
	if err != nil {
		return false, err
	}
	return c.MatchString(value), nil
}

// StringMatches is Envoy's StringMatcher over a value.
func StringMatches(m *matcherv3.StringMatcher, value string) (bool, error) {
	fold := func(s string) string { return s }
	if m.GetIgnoreCase() {
		fold = strings.ToLower
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(value) == fold(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(value), fold(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(value), fold(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(value), fold(p.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		return fullMatch(p.SafeRegex.GetRegex(), value)
	}
	return false, fmt.Errorf("string matcher %v is not modelled", m)
}

// HeaderMatches is Envoy's HeaderMatcher over a request: a missing header
// matches only a present_match false (or, with treat_missing_header_as_empty,
// is the empty value); invert_match inverts the result.
func HeaderMatches(h *routev3.HeaderMatcher, r Request) (bool, error) {
	value, present := r.Header(h.GetName())
	if !present && h.GetTreatMissingHeaderAsEmpty() {
		value, present = "", true
	}
	var ok bool
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		ok = present == s.PresentMatch
	case *routev3.HeaderMatcher_StringMatch:
		m, err := StringMatches(s.StringMatch, value)
		if err != nil {
			return false, err
		}
		ok = present && m
	default:
		return false, fmt.Errorf("header matcher %v is not modelled", h)
	}
	if h.GetInvertMatch() {
		return !ok, nil
	}
	return ok, nil
}

// queryMatches is Envoy's QueryParameterMatcher: it reads a parameter's
// first value.
func queryMatches(q *routev3.QueryParameterMatcher, values url.Values) (bool, error) {
	vs, present := values[q.GetName()]
	switch s := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_PresentMatch:
		return present == s.PresentMatch, nil
	case *routev3.QueryParameterMatcher_StringMatch:
		if !present {
			return false, nil
		}
		return StringMatches(s.StringMatch, vs[0])
	}
	return false, fmt.Errorf("query parameter matcher %v is not modelled", q)
}

// MetadataMatches walks a metadata matcher's path into the request's
// dynamic metadata and applies its value matcher (a missing value matches
// only an absence).
func MetadataMatches(m *matcherv3.MetadataMatcher, md Metadata) (bool, error) {
	var v any
	if s := md[m.GetFilter()]; s != nil {
		v = s
	}
	for _, seg := range m.GetPath() {
		obj, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = obj[seg.GetKey()]
	}
	ok, err := valueMatches(m.GetValue(), v)
	if m.GetInvert() {
		return !ok && err == nil, err
	}
	return ok, err
}

func valueMatches(m *matcherv3.ValueMatcher, v any) (bool, error) {
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_StringMatch:
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		return StringMatches(p.StringMatch, s)
	case *matcherv3.ValueMatcher_PresentMatch:
		return (v != nil) == p.PresentMatch, nil
	case *matcherv3.ValueMatcher_ListMatch:
		list, ok := v.([]any)
		if !ok {
			return false, nil
		}
		return anyTrue(list, func(x any) (bool, error) { return valueMatches(p.ListMatch.GetOneOf(), x) })
	case *matcherv3.ValueMatcher_OrMatch:
		return anyTrue(p.OrMatch.GetValueMatchers(), func(x *matcherv3.ValueMatcher) (bool, error) { return valueMatches(x, v) })
	case *matcherv3.ValueMatcher_BoolMatch:
		b, ok := v.(bool)
		return ok && b == p.BoolMatch, nil
	}
	return false, fmt.Errorf("value matcher %v is not modelled", m)
}

func anyTrue[T any](items []T, f func(T) (bool, error)) (bool, error) {
	for _, it := range items {
		ok, err := f(it)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func allTrue[T any](items []T, f func(T) (bool, error)) (bool, error) {
	for _, it := range items {
		ok, err := f(it)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
