package explain

import (
	"fmt"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// applied is what the rule a request takes does with it.
type applied struct {
	routed *Routed
	// redirect is the Location and status of a RequestRedirect, which the
	// gateway answers itself.
	redirect string
	// notes say what the rule does that decides nothing here (a mirror,
	// CORS, a Host rewrite, a timeout).
	notes []string
}

// applyRule applies the filters and backendRefs of the rule candidate c
// took for the request p: header modifiers, a URL rewrite (the full path,
// or the prefix its PathPrefix match matched), a redirect, and the
// backends with their weights (a 0 weight receives nothing). Filters it
// does not model (ExtensionRef, ExternalAuth, a backend's filters other
// than header modifiers) are an error.
func applyRule(c candidate, p Probe) (applied, error) {
	var rule gwapiv1.HTTPRouteRule
	if c.rule < len(c.at.route.Spec.Rules) {
		rule = c.at.route.Spec.Rules[c.rule]
	}
	out := applied{routed: &Routed{Route: c.ruleName(), Path: p.Path}}
	for _, f := range rule.Filters {
		if err := out.filter(f, c, p); err != nil {
			return applied{}, fmt.Errorf("HTTPRoute %s %s: %w", c.key(), c.ruleName(), err)
		}
		if out.redirect != "" {
			return out, nil
		}
	}
	if rule.Timeouts != nil && rule.Timeouts.Request != nil {
		out.notes = append(out.notes, "request timeout "+string(*rule.Timeouts.Request))
	}
	total := int32(0)
	for _, b := range rule.BackendRefs {
		total += weight(b)
	}
	for _, b := range rule.BackendRefs {
		if weight(b) == 0 && total > 0 || total == 0 {
			continue
		}
		out.routed.Destinations = append(out.routed.Destinations, destinationOf(b.BackendRef, c.at.route.Namespace))
		for _, f := range b.Filters {
			if f.Type != gwapiv1.HTTPRouteFilterRequestHeaderModifier && f.Type != gwapiv1.HTTPRouteFilterResponseHeaderModifier {
				return applied{}, fmt.Errorf("HTTPRoute %s %s: backend filter %s is not modelled", c.key(), c.ruleName(), f.Type)
			}
			if err := out.filter(f, c, p); err != nil {
				return applied{}, err
			}
		}
	}
	return out, nil
}

func weight(b gwapiv1.HTTPBackendRef) int32 {
	if b.Weight == nil {
		return 1
	}
	return *b.Weight
}

// destinationOf is a backendRef as a Destination: a Service of the route's
// namespace unless it names another; another kind has no Service.
func destinationOf(ref gwapiv1.BackendRef, ns string) Destination {
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	d := Destination{Host: string(ref.Name) + "." + ns + ".svc.cluster.local"}
	if ref.Port != nil {
		d.Port = uint32(*ref.Port)
	}
	if (ref.Group == nil || *ref.Group == "") && (ref.Kind == nil || *ref.Kind == "Service") {
		d.Service, d.Namespace = string(ref.Name), ns
	} else {
		d.Host = fmt.Sprintf("%s %s/%s", kindOf(ref), ns, ref.Name)
	}
	return d
}

func kindOf(ref gwapiv1.BackendRef) string {
	kind := "Service"
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if ref.Group != nil && *ref.Group != "" {
		kind += "." + string(*ref.Group)
	}
	return kind
}

// filter applies one filter of the rule.
func (a *applied) filter(f gwapiv1.HTTPRouteFilter, c candidate, p Probe) error {
	r := a.routed
	switch f.Type {
	case gwapiv1.HTTPRouteFilterRequestHeaderModifier:
		r.RemovedRequestHeaders = append(r.RemovedRequestHeaders, f.RequestHeaderModifier.Remove...)
		for _, h := range append(append([]gwapiv1.HTTPHeader{}, f.RequestHeaderModifier.Set...), f.RequestHeaderModifier.Add...) {
			if r.RequestHeaders == nil {
				r.RequestHeaders = map[string]string{}
			}
			r.RequestHeaders[string(h.Name)] = h.Value
		}
	case gwapiv1.HTTPRouteFilterResponseHeaderModifier:
		m := f.ResponseHeaderModifier
		r.RemovedResponse = append(r.RemovedResponse, m.Remove...)
		for _, h := range m.Set {
			if r.ResponseSet == nil {
				r.ResponseSet = map[string]string{}
			}
			r.ResponseSet[string(h.Name)] = h.Value
		}
		for _, h := range m.Add {
			if r.ResponseAdd == nil {
				r.ResponseAdd = map[string]string{}
			}
			r.ResponseAdd[string(h.Name)] = h.Value
		}
	case gwapiv1.HTTPRouteFilterURLRewrite:
		if h := f.URLRewrite.Hostname; h != nil {
			a.notes = append(a.notes, "the Host header is rewritten to "+string(*h))
		}
		path, err := modifiedPath(f.URLRewrite.Path, c.match, p.Path)
		r.Path = path
		return err
	case gwapiv1.HTTPRouteFilterRequestRedirect:
		return a.redirectTo(f.RequestRedirect, c, p)
	case gwapiv1.HTTPRouteFilterRequestMirror:
		a.notes = append(a.notes, fmt.Sprintf("mirrored to %s %s (its answers are dropped)", kindOf(gwapiv1.BackendRef{BackendObjectReference: f.RequestMirror.BackendRef}), f.RequestMirror.BackendRef.Name))
	case gwapiv1.HTTPRouteFilterCORS:
		a.notes = append(a.notes, "a CORS filter answers preflight requests itself")
	default:
		return fmt.Errorf("filter %s is not modelled", f.Type)
	}
	return nil
}

// modifiedPath is the path after a path modifier: the full path replaced,
// or the prefix the rule's PathPrefix match matched.
func modifiedPath(m *gwapiv1.HTTPPathModifier, match gwapiv1.HTTPRouteMatch, path string) (string, error) {
	switch {
	case m == nil:
		return path, nil
	case m.Type == gwapiv1.FullPathHTTPPathModifier && m.ReplaceFullPath != nil:
		return *m.ReplaceFullPath, nil
	case m.Type == gwapiv1.PrefixMatchHTTPPathModifier && m.ReplacePrefixMatch != nil && pathType(match) == gwapiv1.PathMatchPathPrefix:
		rest := strings.TrimPrefix(path, strings.TrimSuffix(pathValue(match), "/"))
		out := strings.TrimSuffix(*m.ReplacePrefixMatch, "/") + rest
		if out == "" {
			return "/", nil
		}
		if !strings.HasPrefix(out, "/") {
			out = "/" + out
		}
		return out, nil
	}
	return "", fmt.Errorf("path modifier %s is not modelled with a %s match", m.Type, pathType(match))
}

// redirectTo is a RequestRedirect's answer: 302 unless it names a status,
// to the request's scheme, host and path unless it replaces them.
func (a *applied) redirectTo(rd *gwapiv1.HTTPRequestRedirectFilter, c candidate, p Probe) error {
	scheme, host, status := "http", p.Host, 302
	if p.tls {
		scheme = "https"
	}
	if rd.Scheme != nil {
		scheme = *rd.Scheme
	}
	if rd.Hostname != nil {
		host = string(*rd.Hostname)
	}
	if rd.Port != nil {
		host = fmt.Sprintf("%s:%d", host, *rd.Port)
	}
	if rd.StatusCode != nil {
		status = *rd.StatusCode
	}
	path, err := modifiedPath(rd.Path, c.match, p.Path)
	if err != nil {
		return err
	}
	a.redirect = fmt.Sprintf("%d to %s://%s%s", status, scheme, host, path)
	return nil
}
