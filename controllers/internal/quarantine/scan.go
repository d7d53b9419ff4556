package quarantine

import (
	"bytes"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Cheap readings of the JSON the API server writes, so that a good object
// costs one typed decode and a good list nothing but its items' decodes.
// Each answers ok=false for any shape it is not sure of, and the callers
// then take the full path with encoding/json.

// sniffFrame reads a watch frame in the shape the API server writes,
// {"type":"ADDED","object":{...}}, from its leading and trailing bytes.
// The object is only provisionally one JSON value: the caller's typed
// decode, which rejects trailing data, confirms it, and with it that the
// frame has these two members and no others.
func sniffFrame(frame []byte) (watch.EventType, []byte, bool) {
	rest, ok := bytes.CutPrefix(frame, []byte(`{"type":`))
	if !ok {
		return "", nil, false
	}
	typ, rest, ok := plainString(rest)
	if !ok {
		return "", nil, false
	}
	obj, ok := bytes.CutPrefix(rest, []byte(`,"object":`))
	if !ok {
		return "", nil, false
	}
	if obj, ok = bytes.CutSuffix(bytes.TrimRight(obj, " \t\r\n"), []byte("}")); !ok {
		return "", nil, false
	}
	return watch.EventType(typ), obj, true
}

// sniffKind reads an object's kind and apiVersion from its first two
// members, in either order (typed objects start with kind, custom resources
// with apiVersion). The caller confirms them against the kind its typed
// decode finds, which also sees any later duplicate.
func sniffKind(obj []byte) (schema.GroupVersionKind, bool) {
	rest, ok := bytes.CutPrefix(obj, []byte("{"))
	var kind, apiVersion []byte
	for range 2 {
		var key, value []byte
		if !ok {
			return schema.GroupVersionKind{}, false
		}
		if key, rest, ok = plainString(rest); ok {
			rest, ok = bytes.CutPrefix(rest, []byte(":"))
		}
		if ok {
			value, rest, ok = plainString(rest)
		}
		switch {
		case !ok || len(value) == 0:
			return schema.GroupVersionKind{}, false
		case string(key) == "kind" && kind == nil:
			kind = value
		case string(key) == "apiVersion" && apiVersion == nil:
			apiVersion = value
		default:
			return schema.GroupVersionKind{}, false
		}
		rest, ok = bytes.CutPrefix(rest, []byte(","))
	}
	gv, err := schema.ParseGroupVersion(string(apiVersion))
	if !ok || err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(string(kind)), true
}

// plainString reads a JSON string without escapes at the start of b.
func plainString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end < 0 || bytes.IndexByte(b[1:1+end], '\\') >= 0 {
		return nil, nil, false
	}
	return b[1 : 1+end], b[2+end:], true
}

// span is a JSON value's place in a document: doc[start:end].
type span struct{ start, end int }

// listShape is where a response body's top-level members are.
type listShape struct {
	gvk   schema.GroupVersionKind
	items span // zero when the body has no items
}

// readShape walks the top-level members of a response body without
// decoding them. It gives up (ok false) on anything encoding/json or the
// typed decoders could read differently: escaped keys, duplicates of kind,
// apiVersion or items, or a spelling of them in another case (which
// encoding/json, reading kind and apiVersion, would accept).
func readShape(body []byte) (listShape, bool) {
	var shape listShape
	var kind, apiVersion []byte
	ok := members(body, func(key []byte, escaped bool, value span) bool {
		raw := body[value.start:value.end]
		var dup bool
		switch {
		case escaped:
			return false
		case string(key) == "kind":
			dup, kind = kind != nil, raw
		case string(key) == "apiVersion":
			dup, apiVersion = apiVersion != nil, raw
		case string(key) == "items":
			dup, shape.items = shape.items != span{}, value
		case bytes.EqualFold(key, []byte("kind")), bytes.EqualFold(key, []byte("apiVersion")),
			bytes.EqualFold(key, []byte("items")):
			return false
		}
		return !dup
	})
	if !ok {
		return listShape{}, false
	}
	k, rest, ok := plainString(kind)
	if !ok || len(rest) != 0 || len(k) == 0 {
		return listShape{}, false
	}
	v, rest, ok := plainString(apiVersion)
	if !ok || len(rest) != 0 || len(v) == 0 {
		return listShape{}, false
	}
	gv, err := schema.ParseGroupVersion(string(v))
	if err != nil {
		return listShape{}, false
	}
	shape.gvk = gv.WithKind(string(k))
	return shape, true
}

// members calls visit with each member of the JSON object doc, in order,
// and reports whether doc is one object it could walk to the end and visit
// accepted every member. It skips values without validating them: the
// typed decoders validate what is passed on.
func members(doc []byte, visit func(key []byte, escaped bool, value span) bool) bool {
	return memberSpans(doc, func(key []byte, escaped bool, _ int, value span) bool { return visit(key, escaped, value) })
}

// memberSpans is members that also tells where each member's key starts.
func memberSpans(doc []byte, visit func(key []byte, escaped bool, keyStart int, value span) bool) bool {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return skipSpace(doc, i+1) == len(doc)
	}
	for {
		keyStart := i
		keyEnd, escaped, ok := skipString(doc, keyStart)
		if !ok {
			return false
		}
		i = skipSpace(doc, keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return false
		}
		start := skipSpace(doc, i+1)
		end, ok := skipValue(doc, start)
		if !ok || !visit(doc[keyStart+1:keyEnd-1], escaped, keyStart, span{start, end}) {
			return false
		}
		i = skipSpace(doc, end)
		switch {
		case i < len(doc) && doc[i] == '}':
			return skipSpace(doc, i+1) == len(doc)
		case i < len(doc) && doc[i] == ',':
			i = skipSpace(doc, i+1)
		default:
			return false
		}
	}
}

// elements calls visit with each element of the JSON array doc[array],
// in order, and reports whether it could walk the array to its end and
// visit accepted every element.
func elements(doc []byte, array span, visit func(element span) bool) bool {
	i := skipSpace(doc, array.start)
	if i >= array.end || doc[i] != '[' {
		return false
	}
	i = skipSpace(doc, i+1)
	if i < array.end && doc[i] == ']' {
		return i+1 == array.end
	}
	for {
		end, ok := skipValue(doc[:array.end], i)
		if !ok || !visit(span{i, end}) {
			return false
		}
		i = skipSpace(doc, end)
		switch {
		case i < array.end && doc[i] == ']':
			return i+1 == array.end
		case i < array.end && doc[i] == ',':
			i = skipSpace(doc, i+1)
		default:
			return false
		}
	}
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string starting at doc[i], and whether
// it has escapes.
func skipString(doc []byte, i int) (end int, escaped, ok bool) {
	if i >= len(doc) || doc[i] != '"' {
		return 0, false, false
	}
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, true
		}
	}
	return 0, false, false
}

// skipValue returns the end of the value starting at doc[i]: a string, an
// object or array (by nesting depth, skipping strings), or a literal.
func skipValue(doc []byte, i int) (int, bool) {
	if i >= len(doc) {
		return 0, false
	}
	switch doc[i] {
	case '"':
		end, _, ok := skipString(doc, i)
		return end, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				end, _, ok := skipString(doc, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(doc) && !endsLiteral(doc[j]) {
		j++
	}
	return j, j > i
}

func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// withoutMember returns doc, a JSON object, without the member at path
// (each element a member's key, the last the one removed, the others the
// objects on the way): a new document, or nil when doc has no such member
// or the walk is not sure of it. It is not sure of an object on the path
// with an escaped key (which could spell a key of the path) or with a key
// of the path twice; keys are compared exactly, as the case-sensitive
// decoders of client-go read them.
func withoutMember(doc []byte, path ...string) []byte {
	from, to, ok := memberCut(doc, 0, path)
	if !ok {
		return nil
	}
	out := make([]byte, 0, len(doc)-(to-from))
	out = append(out, doc[:from]...)
	return append(out, doc[to:]...)
}

// memberCut finds what withoutMember removes, doc[from:to], in the object
// doc[at:]'s own part (the value it walks ends where the object ends).
func memberCut(doc []byte, at int, path []string) (from, to int, ok bool) {
	if len(path) == 0 {
		return 0, 0, false
	}
	obj := doc[at:]
	if at > 0 {
		end, ok := skipValue(doc, at)
		if !ok {
			return 0, 0, false
		}
		obj = doc[at:end]
	}
	var found bool
	var keyStart, cutFrom int
	var value span
	prevEnd := -1 // end of the previous member's value
	ok = memberSpans(obj, func(key []byte, escaped bool, start int, v span) bool {
		switch {
		case escaped:
			return false
		case string(key) == path[0]:
			if found {
				return false
			}
			found, keyStart, value, cutFrom = true, start, v, prevEnd
		}
		prevEnd = v.end
		return true
	})
	if !ok || !found {
		return 0, 0, false
	}
	if len(path) > 1 {
		return memberCut(doc, at+value.start, path[1:])
	}
	// The member and the comma after it; for the last member, the comma
	// before it.
	from, to = keyStart, skipSpace(obj, value.end)
	switch {
	case to < len(obj) && obj[to] == ',':
		to = skipSpace(obj, to+1)
	case cutFrom >= 0:
		from = cutFrom
	}
	return at + from, at + to, true
}
