package istio

import (
	"fmt"
	"net/netip"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	uritemplatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// sidecarRequest is what a sidecar's RBAC filters read of a request.
type sidecarRequest struct {
	envoyRequest
	Port int
	// Principal is the peer's SPIFFE identity, with its scheme.
	Principal string
	// DirectIP is the peer's address, RemoteIP the client's.
	DirectIP, RemoteIP netip.Addr
	// Metadata is the request's dynamic metadata: filter, then its struct.
	Metadata map[string]map[string]any
}

// rbacMatches returns the name of a policy of the RBAC rules that matches
// the request, or "" (Envoy: a policy matches when one of its permissions
// and one of its principals do).
func rbacMatches(rules *rbacv3.RBAC, r sidecarRequest) (string, error) {
	for name, p := range rules.GetPolicies() {
		if p.GetCondition() != nil || p.GetCheckedCondition() != nil {
			return "", fmt.Errorf("policy %s: CEL conditions are not modelled", name)
		}
		perm, err := anyTrue(p.GetPermissions(), func(x *rbacv3.Permission) (bool, error) { return permissionMatches(x, r) })
		if err != nil {
			return "", fmt.Errorf("policy %s: %w", name, err)
		}
		if !perm {
			continue
		}
		prin, err := anyTrue(p.GetPrincipals(), func(x *rbacv3.Principal) (bool, error) { return principalMatches(x, r) })
		if err != nil {
			return "", fmt.Errorf("policy %s: %w", name, err)
		}
		if prin {
			return name, nil
		}
	}
	return "", nil
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

func permissionMatches(p *rbacv3.Permission, r sidecarRequest) (bool, error) {
	switch rule := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		return rule.Any, nil
	case *rbacv3.Permission_AndRules:
		return allTrue(rule.AndRules.GetRules(), func(x *rbacv3.Permission) (bool, error) { return permissionMatches(x, r) })
	case *rbacv3.Permission_OrRules:
		return anyTrue(rule.OrRules.GetRules(), func(x *rbacv3.Permission) (bool, error) { return permissionMatches(x, r) })
	case *rbacv3.Permission_NotRule:
		ok, err := permissionMatches(rule.NotRule, r)
		return !ok && err == nil, err
	case *rbacv3.Permission_Header:
		return headerMatches(rule.Header, r.envoyRequest)
	case *rbacv3.Permission_UrlPath:
		return stringMatches(rule.UrlPath.GetPath(), r.Path)
	case *rbacv3.Permission_DestinationPort:
		return int(rule.DestinationPort) == r.Port, nil
	case *rbacv3.Permission_Metadata:
		// Istio 1.31 writes the deprecated metadata rule, not sourced_metadata.
		return metadataMatches(rule.Metadata, r.Metadata) //nolint:staticcheck // what Istio writes

	case *rbacv3.Permission_UriTemplate:
		var cfg uritemplatev3.UriTemplateMatchConfig
		if err := rule.UriTemplate.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
			return false, err
		}
		return uriTemplateMatches(cfg.GetPathTemplate(), r.Path)
	}
	return false, fmt.Errorf("permission %v is not modelled", p)
}

// uriTemplateMatches is Envoy's uri_template match: "*" one whole segment,
// "**" the rest of the path (one or more segments), literals exactly.
func uriTemplateMatches(template, path string) (bool, error) {
	tsegs := strings.Split(strings.TrimPrefix(template, "/"), "/")
	psegs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, t := range tsegs {
		switch {
		case t == "**":
			if i != len(tsegs)-1 {
				return false, fmt.Errorf("template %q: ** before the end is not modelled", template)
			}
			return len(psegs) > i, nil
		case i >= len(psegs):
			return false, nil
		case t == "*":
			if psegs[i] == "" {
				return false, nil
			}
		case strings.ContainsAny(t, "*{}"):
			return false, fmt.Errorf("template segment %q is not modelled", t)
		case t != psegs[i]:
			return false, nil
		}
	}
	return len(psegs) == len(tsegs), nil
}

func principalMatches(p *rbacv3.Principal, r sidecarRequest) (bool, error) {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		return id.Any, nil
	case *rbacv3.Principal_AndIds:
		return allTrue(id.AndIds.GetIds(), func(x *rbacv3.Principal) (bool, error) { return principalMatches(x, r) })
	case *rbacv3.Principal_OrIds:
		return anyTrue(id.OrIds.GetIds(), func(x *rbacv3.Principal) (bool, error) { return principalMatches(x, r) })
	case *rbacv3.Principal_NotId:
		ok, err := principalMatches(id.NotId, r)
		return !ok && err == nil, err
	case *rbacv3.Principal_Authenticated_:
		if r.Principal == "" {
			return false, nil
		}
		if id.Authenticated.GetPrincipalName() == nil {
			return true, nil
		}
		return stringMatches(id.Authenticated.GetPrincipalName(), r.Principal)
	case *rbacv3.Principal_DirectRemoteIp:
		return cidrContains(id.DirectRemoteIp, r.DirectIP)
	case *rbacv3.Principal_RemoteIp:
		return cidrContains(id.RemoteIp, r.RemoteIP)
	case *rbacv3.Principal_Header:
		return headerMatches(id.Header, r.envoyRequest)
	case *rbacv3.Principal_UrlPath:
		return stringMatches(id.UrlPath.GetPath(), r.Path)
	case *rbacv3.Principal_Metadata:
		return metadataMatches(id.Metadata, r.Metadata) //nolint:staticcheck // what Istio writes, as above
	}
	return false, fmt.Errorf("principal %v is not modelled", p)
}

func cidrContains(c *corev3.CidrRange, ip netip.Addr) (bool, error) {
	addr, err := netip.ParseAddr(c.GetAddressPrefix())
	if err != nil {
		return false, err
	}
	bits := int(c.GetPrefixLen().GetValue())
	if c.GetPrefixLen() == nil {
		bits = addr.BitLen()
	}
	prefix, err := addr.Prefix(bits)
	if err != nil {
		return false, err
	}
	return ip.IsValid() && prefix.Contains(ip), nil
}

// metadataMatches walks a metadata matcher's path into the request's
// dynamic metadata and applies its value matcher (a missing value matches
// nothing but a null or absence match).
func metadataMatches(m *matcherv3.MetadataMatcher, md map[string]map[string]any) (bool, error) {
	var v any = md[m.GetFilter()]
	if md[m.GetFilter()] == nil {
		v = nil
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
		return stringMatches(p.StringMatch, s)
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
