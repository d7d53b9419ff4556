package envoy

import (
	"fmt"
	"net/url"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Entry is one entry of a rate limit descriptor.
type Entry struct{ Key, Value string }

// Descriptors are the descriptors Envoy's rate limit filter sends for the
// request from the route's (or the filter's) rate_limits: each RateLimit
// gives one descriptor of its actions' entries in order, or none when an
// action cannot produce its entry (a missing header without
// skip_if_absent, a header_value_match that does not hold); remote is
// the client's address, md the dynamic metadata.
func Descriptors(limits []*routev3.RateLimit, r Request, remote string, md Metadata) ([][]Entry, error) {
	var out [][]Entry
	for i, l := range limits {
		if l.GetStage().GetValue() != 0 || l.GetLimit() != nil || l.GetDisableKey() != "" {
			return nil, fmt.Errorf("rate limit %d: stage, limit and disable_key are not modelled", i)
		}
		var d []Entry
		keep := true
		for _, a := range l.GetActions() {
			e, ok, err := entryOf(a, r, remote, md)
			if err != nil {
				return nil, fmt.Errorf("rate limit %d: %w", i, err)
			}
			if !ok {
				keep = false
				break
			}
			if e != nil {
				d = append(d, *e)
			}
		}
		if keep && len(d) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// entryOf is one action's entry: nil with ok to leave out just the entry,
// ok false to leave out the descriptor.
func entryOf(a *routev3.RateLimit_Action, r Request, remote string, md Metadata) (*Entry, bool, error) {
	switch at := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_GenericKey_:
		key := at.GenericKey.GetDescriptorKey()
		if key == "" {
			key = "generic_key"
		}
		return &Entry{key, at.GenericKey.GetDescriptorValue()}, true, nil
	case *routev3.RateLimit_Action_RemoteAddress_:
		return &Entry{"remote_address", remote}, true, nil
	case *routev3.RateLimit_Action_RequestHeaders_:
		v, ok := r.Header(at.RequestHeaders.GetHeaderName())
		if !ok {
			return nil, at.RequestHeaders.GetSkipIfAbsent(), nil
		}
		return &Entry{at.RequestHeaders.GetDescriptorKey(), v}, true, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		hv := at.HeaderValueMatch
		all, err := allTrue(hv.GetHeaders(), func(h *routev3.HeaderMatcher) (bool, error) { return HeaderMatches(h, r) })
		if err != nil {
			return nil, false, err
		}
		expect := hv.GetExpectMatch() == nil || hv.GetExpectMatch().GetValue()
		if all != expect {
			return nil, false, nil
		}
		key := hv.GetDescriptorKey()
		if key == "" {
			key = "header_match"
		}
		return &Entry{key, hv.GetDescriptorValue()}, true, nil
	case *routev3.RateLimit_Action_QueryParameterValueMatch_:
		qv := at.QueryParameterValueMatch
		values, err := url.ParseQuery(r.Query)
		if err != nil {
			return nil, false, err
		}
		all, err := allTrue(qv.GetQueryParameters(), func(q *routev3.QueryParameterMatcher) (bool, error) { return queryMatches(q, values) })
		if err != nil {
			return nil, false, err
		}
		if expect := qv.GetExpectMatch() == nil || qv.GetExpectMatch().GetValue(); all != expect {
			return nil, false, nil
		}
		key := qv.GetDescriptorKey()
		if key == "" {
			key = "query_match"
		}
		return &Entry{key, qv.GetDescriptorValue()}, true, nil
	case *routev3.RateLimit_Action_Metadata:
		return metadataEntry(at.Metadata, md)
	}
	return nil, false, fmt.Errorf("rate limit action %v is not modelled", a)
}

// metadataEntry reads a dynamic metadata value (a string) for a
// descriptor; absent, the default value, else the entry or descriptor is
// left out as skip_if_absent says.
func metadataEntry(m *routev3.RateLimit_Action_MetaData, md Metadata) (*Entry, bool, error) {
	if m.GetSource() != routev3.RateLimit_Action_MetaData_DYNAMIC {
		return nil, false, fmt.Errorf("route entry metadata is not modelled")
	}
	var v any
	if s := md[m.GetMetadataKey().GetKey()]; s != nil {
		v = s
	}
	for _, seg := range m.GetMetadataKey().GetPath() {
		obj, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = obj[seg.GetKey()]
	}
	s, ok := v.(string)
	switch {
	case ok && s != "":
		return &Entry{m.GetDescriptorKey(), s}, true, nil
	case m.GetDefaultValue() != "":
		return &Entry{m.GetDescriptorKey(), m.GetDefaultValue()}, true, nil
	}
	return nil, m.GetSkipIfAbsent(), nil
}
