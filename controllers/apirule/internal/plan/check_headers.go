package plan

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Bounds of response headers, request header removals and client
// addresses, which the CRD sets too.
const (
	maxRemovedHeaders   = 8
	maxResponseHeaders  = 8
	maxAddressBlocks    = 16
	maxTrustedProxies   = 8
	maxAddressBlockSize = 43
)

// checkForgedRemovals refuses, with the forged requests (ErrForgesRequest:
// the controller takes back a route that does it), a removal of a header
// the mesh reads after the gateway: the token in authorization, the
// client address in x-forwarded-for, the trace. Without x-forwarded-for, a
// backend's sidecar would take the gateway's own address for the client's.
func checkForgedRemovals(rule porticov1alpha1.Rule) error {
	if rule.Request == nil {
		return nil
	}
	for _, name := range rule.Request.RemoveHeaders {
		if porticov1alpha1.IsReservedRequestHeader(string(name)) {
			return forges("rule %s may not remove the header %s, which backends read as %s: the mesh reads it after the gateway "+
				"(the caller's identity, the request's routing or its trace), so removing it would change who the backend's access policy sees",
				rule.Path, name, porticov1alpha1.NormalizeHeaderName(string(name)))
		}
	}
	return nil
}

// checkHeaderChanges repeats the API server's checks of the removals and
// response headers: bounds, names, values, and one header named twice
// (as backends read names) across set, add and remove.
func checkHeaderChanges(rule porticov1alpha1.Rule) error {
	if m := rule.Request; m != nil {
		if len(m.RemoveHeaders) > maxRemovedHeaders {
			return fmt.Errorf("rule %s removes %d request headers; at most %d", rule.Path, len(m.RemoveHeaders), maxRemovedHeaders)
		}
		seen := map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			seen[porticov1alpha1.NormalizeHeaderName(name)] = "request.headers"
		}
		for _, name := range m.RemoveHeaders {
			if err := claimHeader(rule.Path, seen, string(name), "request.removeHeaders"); err != nil {
				return err
			}
		}
	}
	m := rule.Response
	if m == nil {
		return nil
	}
	if len(m.Set) > maxResponseHeaders || len(m.Add) > maxResponseHeaders || len(m.Remove) > maxResponseHeaders {
		return fmt.Errorf("rule %s sets %d, adds %d and removes %d response headers; at most %d each", rule.Path, len(m.Set), len(m.Add), len(m.Remove), maxResponseHeaders)
	}
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(m.Set)) {
		if err := checkResponseHeader(rule.Path, seen, name, string(m.Set[name]), "response.set"); err != nil {
			return err
		}
	}
	for _, h := range m.Add {
		if err := checkResponseHeader(rule.Path, seen, string(h.Name), string(h.Value), "response.add"); err != nil {
			return err
		}
	}
	for _, name := range m.Remove {
		if err := checkResponseHeader(rule.Path, seen, string(name), "-", "response.remove"); err != nil {
			return err
		}
	}
	return nil
}

func checkResponseHeader(path string, seen map[string]string, name, value, field string) error {
	if porticov1alpha1.IsReservedResponseHeader(name) {
		return fmt.Errorf("rule %s: %s may not name %s (read as %s): Envoy owns the response's framing and connection, spec.cors the access-control-* headers, "+
			"the backend and its authorizer set-cookie, and x-envoy-* and x-portico-* are kept", path, field, name, porticov1alpha1.NormalizeHeaderName(name))
	}
	if len(value) > maxHeaderValue || !headerValue.MatchString(value) {
		return fmt.Errorf("rule %s: %s header %s: a value must be 1 to %d printable ASCII characters without '%%' and without spaces at either end", path, field, name, maxHeaderValue)
	}
	return claimHeader(path, seen, name, field)
}

// claimHeader refuses a name that is not a lower-case token, or that reads
// as a header another field of the rule already names.
func claimHeader(path string, seen map[string]string, name, field string) error {
	if !headerName.MatchString(name) {
		return fmt.Errorf("rule %s: %s name %q must be a lower-case HTTP header name of at most 64 characters", path, field, name)
	}
	key := porticov1alpha1.NormalizeHeaderName(name)
	if other, dup := seen[key]; dup {
		return fmt.Errorf("rule %s names the header %s in %s and %s (backends read '_' and '.' as '-'): which one applies would be undefined; name it once", path, key, other, field)
	}
	seen[key] = field
	return nil
}

// checkHeaderTotals bounds the header changes and client address blocks
// of all the APIRule's rules together, as the CRD does.
func checkHeaderTotals(r *porticov1alpha1.APIRule) error {
	var response, removed, blocks int
	for _, rule := range r.Spec.Rules {
		if m := rule.Response; m != nil {
			response += len(m.Set) + len(m.Add) + len(m.Remove)
		}
		if m := rule.Request; m != nil {
			removed += len(m.RemoveHeaders)
		}
		if c := rule.ClientAddresses; c != nil {
			blocks += len(c.Allow) + len(c.Deny)
		}
	}
	if response > porticov1alpha1.MaxResponseHeadersPerAPIRule || removed > porticov1alpha1.MaxRemovedHeadersPerAPIRule ||
		blocks > porticov1alpha1.MaxAddressBlocksPerAPIRule {
		return fmt.Errorf("the rules change %d response headers, remove %d request headers and list %d client address blocks; an APIRule has at most %d, %d and %d in all",
			response, removed, blocks, porticov1alpha1.MaxResponseHeadersPerAPIRule, porticov1alpha1.MaxRemovedHeadersPerAPIRule, porticov1alpha1.MaxAddressBlocksPerAPIRule)
	}
	return nil
}

// checkClientAddresses refuses client addresses that are not canonical IP
// addresses or CIDR blocks, too many, and any while the administrator has
// not said how many proxies stand in front of the gateway: read with
// another count than the gateway's, a client's address is another's.
func checkClientAddresses(p *Plan) error {
	for _, rule := range p.Rules {
		c := rule.Spec.ClientAddresses
		if c == nil {
			continue
		}
		if len(c.Allow)+len(c.Deny) == 0 {
			return fmt.Errorf("rule %s: clientAddresses needs allow, deny or both", rule.Path)
		}
		if len(c.Allow) > maxAddressBlocks || len(c.Deny) > maxAddressBlocks {
			return fmt.Errorf("rule %s: clientAddresses lists %d allowed and %d denied blocks; at most %d each", rule.Path, len(c.Allow), len(c.Deny), maxAddressBlocks)
		}
		for _, b := range append(slices.Clone(c.Allow), c.Deny...) {
			if !CanonicalAddressBlock(string(b)) {
				return fmt.Errorf("rule %s: client address %q must be an IP address or a CIDR block in canonical form, such as 203.0.113.0/24", rule.Path, b)
			}
		}
		for _, b := range rule.Backends {
			if b.Namespace != p.APIRule.Namespace {
				return fmt.Errorf("rule %s has clientAddresses, but routes to service %s of another namespace, where the APIRule writes no access policy: "+
					"no one would check the client's address; route to a Service of namespace %s, or let the Service's own namespace set its access policies",
					rule.Path, b, p.APIRule.Namespace)
			}
		}
		if p.Parent != nil {
			return fmt.Errorf("rule %s has clientAddresses, which need Istio mode: a standard HTTPRoute cannot match the client's address "+
				"(the Gateway API has no client-address match; Istio's remoteIpBlocks applies to Istio's access policies), so remove parentRef or the rule's clientAddresses", rule.Path)
		}
		if t := p.TrustedProxies; t == nil || *t < 0 || *t > maxTrustedProxies {
			return fmt.Errorf("rule %s has clientAddresses, but the cluster administrator has not set how many proxies stand in front of the gateway "+
				"(APIGateway spec.apiRules.trustedProxies, 0 to %d): without it the client's address cannot be told from a proxy's; "+
				"the rule is applied once it is set", rule.Path, maxTrustedProxies)
		}
	}
	return nil
}

// CanonicalAddressBlock reports whether s is an IP address or a CIDR
// block as the CRD admits it: no zone, no IPv4 address inside IPv6, no
// bits set after the prefix, written the way Go writes it back (so no
// leading zeros).
func CanonicalAddressBlock(s string) bool {
	if len(s) > maxAddressBlockSize {
		return false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Zone() == "" && !a.Is4In6() && a.String() == s
	}
	prefix, err := netip.ParsePrefix(s)
	if err != nil || prefix.Addr().Is4In6() {
		return false
	}
	return prefix.Masked() == prefix && prefix.String() == s
}
