package envoy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	uritemplatematchv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
)

// AccessRequest is what an RBAC filter reads: the request, the connection
// and the dynamic metadata the filters before it wrote.
type AccessRequest struct {
	Request
	Downstream
	Metadata Metadata
}

// MatchingPolicy returns the name of the first policy (by name, as Envoy
// orders its map) of the rules that matches the request, or "": a policy
// matches when one of its permissions and one of its principals do. CEL
// conditions are not modelled.
func MatchingPolicy(rules *rbacv3.RBAC, r AccessRequest) (string, error) {
	for _, name := range slices.Sorted(maps.Keys(rules.GetPolicies())) {
		p := rules.GetPolicies()[name]
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

func permissionMatches(p *rbacv3.Permission, r AccessRequest) (bool, error) {
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
		return HeaderMatches(rule.Header, r.Request)
	case *rbacv3.Permission_UrlPath:
		return StringMatches(rule.UrlPath.GetPath(), r.Path)
	case *rbacv3.Permission_DestinationPort:
		return int(rule.DestinationPort) == r.Port, nil
	case *rbacv3.Permission_Metadata:
		// Istio 1.31 writes the deprecated metadata rule, not sourced_metadata.
		return MetadataMatches(rule.Metadata, r.Metadata) //nolint:staticcheck // what Istio writes
	case *rbacv3.Permission_UriTemplate:
		cfg := &uritemplatematchv3.UriTemplateMatchConfig{}
		if err := rule.UriTemplate.GetTypedConfig().UnmarshalTo(cfg); err != nil {
			return false, err
		}
		return URITemplateMatches(cfg.GetPathTemplate(), r.Path)
	}
	return false, fmt.Errorf("permission %v is not modelled", p)
}

func principalMatches(p *rbacv3.Principal, r AccessRequest) (bool, error) {
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
		return StringMatches(id.Authenticated.GetPrincipalName(), r.Principal)
	case *rbacv3.Principal_DirectRemoteIp:
		return cidrContains(id.DirectRemoteIp, r.DirectIP)
	case *rbacv3.Principal_RemoteIp:
		return cidrContains(id.RemoteIp, r.RemoteIP)
	case *rbacv3.Principal_Header:
		return HeaderMatches(id.Header, r.Request)
	case *rbacv3.Principal_UrlPath:
		return StringMatches(id.UrlPath.GetPath(), r.Path)
	case *rbacv3.Principal_Metadata:
		return MetadataMatches(id.Metadata, r.Metadata) //nolint:staticcheck // what Istio writes, as above
	}
	return false, fmt.Errorf("principal %v is not modelled", p)
}

func cidrContains(c *corev3.CidrRange, ip netip.Addr) (bool, error) {
	addr, err := netip.ParseAddr(c.GetAddressPrefix())
	if err != nil {
		return false, err
	}
	bits := addr.BitLen()
	if c.GetPrefixLen() != nil {
		bits = int(c.GetPrefixLen().GetValue())
	}
	prefix, err := addr.Prefix(bits)
	if err != nil {
		return false, err
	}
	return ip.IsValid() && prefix.Contains(ip.Unmap()), nil
}
