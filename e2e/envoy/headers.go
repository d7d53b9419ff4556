package envoy

import (
	"fmt"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Mutation is one level's header changes: names to remove, then values to
// add (Envoy removes before it adds at each level).
type Mutation struct {
	Add    []*corev3.HeaderValueOption
	Remove []string
}

// RequestMutations are the request header changes of a forwarded request,
// in the order Envoy applies them: the chosen weighted cluster's (wc, may
// be nil), the route's, the virtual host's, the route configuration's — so
// a less specific level wins, unless the route configuration sets
// most_specific_header_mutations_wins, which reverses the order.
func RequestMutations(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, rt *routev3.Route, wc *routev3.WeightedCluster_ClusterWeight) []Mutation {
	out := []Mutation{
		{wc.GetRequestHeadersToAdd(), wc.GetRequestHeadersToRemove()},
		{rt.GetRequestHeadersToAdd(), rt.GetRequestHeadersToRemove()},
		{vh.GetRequestHeadersToAdd(), vh.GetRequestHeadersToRemove()},
		{rc.GetRequestHeadersToAdd(), rc.GetRequestHeadersToRemove()},
	}
	if rc.GetMostSpecificHeaderMutationsWins() {
		reverse(out)
	}
	return out
}

// ResponseMutations are the response header changes, in the same order.
func ResponseMutations(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, rt *routev3.Route, wc *routev3.WeightedCluster_ClusterWeight) []Mutation {
	out := []Mutation{
		{wc.GetResponseHeadersToAdd(), wc.GetResponseHeadersToRemove()},
		{rt.GetResponseHeadersToAdd(), rt.GetResponseHeadersToRemove()},
		{vh.GetResponseHeadersToAdd(), vh.GetResponseHeadersToRemove()},
		{rc.GetResponseHeadersToAdd(), rc.GetResponseHeadersToRemove()},
	}
	if rc.GetMostSpecificHeaderMutationsWins() {
		reverse(out)
	}
	return out
}

func reverse(ms []Mutation) {
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
}

// Apply runs the mutations over h in order. Values may hold Envoy's
// command operators (%NAME% or %NAME(arg)%; %% is a literal %): vars holds
// the ones the caller knows by their full text ("%DOWNSTREAM_REMOTE_ADDRESS%");
// any other is an error, as a guess would be. A value that formats to ""
// is not added unless keep_empty_value.
func Apply(h http.Header, ms []Mutation, vars map[string]string) error {
	for _, m := range ms {
		for _, name := range m.Remove {
			h.Del(name)
		}
		for _, o := range m.Add {
			if err := add(h, o, vars); err != nil {
				return err
			}
		}
	}
	return nil
}

func add(h http.Header, o *corev3.HeaderValueOption, vars map[string]string) error {
	name := o.GetHeader().GetKey()
	raw := o.GetHeader().GetValue()
	if len(o.GetHeader().GetRawValue()) > 0 {
		raw = string(o.GetHeader().GetRawValue())
	}
	value, err := Format(raw, vars)
	if err != nil {
		return fmt.Errorf("header %s: %w", name, err)
	}
	if value == "" && !o.GetKeepEmptyValue() {
		return nil
	}
	action := o.GetAppendAction()
	if o.GetAppend() != nil { //nolint:staticcheck // older control planes send it
		action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		if o.GetAppend().GetValue() { //nolint:staticcheck // as above
			action = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
	}
	_, exists := h[http.CanonicalHeaderKey(name)]
	switch action {
	case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
		h.Add(name, value)
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		if !exists {
			h.Set(name, value)
		}
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		h.Set(name, value)
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		if exists {
			h.Set(name, value)
		}
	default:
		return fmt.Errorf("header %s: append action %v is not modelled", name, action)
	}
	return nil
}

// Format substitutes a header value's command operators from vars.
func Format(value string, vars map[string]string) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(value, '%')
		if i < 0 {
			b.WriteString(value)
			return b.String(), nil
		}
		b.WriteString(value[:i])
		if strings.HasPrefix(value[i:], "%%") {
			b.WriteByte('%')
			value = value[i+2:]
			continue
		}
		j := strings.IndexByte(value[i+1:], '%')
		if j < 0 {
			return "", fmt.Errorf("value %q: unterminated command operator", value)
		}
		op := value[i : i+j+2]
		v, ok := vars[op]
		if !ok {
			return "", fmt.Errorf("command operator %s is not modelled", op)
		}
		b.WriteString(v)
		value = value[i+j+2:]
	}
}
