package plan

import (
	"maps"
	"slices"
	"strings"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// HeaderChanges are a rule's request header removals and response header
// changes, each sorted by name.
type HeaderChanges struct {
	RemoveRequest  []string
	SetResponse    [][2]string
	AddResponse    [][2]string
	RemoveResponse []string
}

// Empty reports whether the rule changes no response header and removes
// no request header.
func (h HeaderChanges) Empty() bool {
	return len(h.RemoveRequest)+len(h.SetResponse)+len(h.AddResponse)+len(h.RemoveResponse) == 0
}

func headerChanges(rule porticov1alpha1.Rule) HeaderChanges {
	var out HeaderChanges
	if m := rule.Request; m != nil {
		for _, name := range m.RemoveHeaders {
			out.RemoveRequest = append(out.RemoveRequest, string(name))
		}
	}
	if m := rule.Response; m != nil {
		for _, name := range slices.Sorted(maps.Keys(m.Set)) {
			out.SetResponse = append(out.SetResponse, [2]string{name, string(m.Set[name])})
		}
		for _, h := range m.Add {
			out.AddResponse = append(out.AddResponse, [2]string{string(h.Name), string(h.Value)})
		}
		for _, name := range m.Remove {
			out.RemoveResponse = append(out.RemoveResponse, string(name))
		}
	}
	slices.Sort(out.RemoveRequest)
	slices.Sort(out.RemoveResponse)
	slices.SortFunc(out.AddResponse, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	out.RemoveRequest = slices.Compact(out.RemoveRequest)
	out.RemoveResponse = slices.Compact(out.RemoveResponse)
	return out
}

// Clients is a rule's client-address access: the blocks a client's
// address must be in (any, when Allow is set) and may not be in (Deny),
// each sorted and once.
type Clients struct {
	Allow, Deny []string
}

// Equal reports whether two client-address accesses let the same clients
// through; nil is everyone.
func (c *Clients) Equal(o *Clients) bool {
	if c == nil || o == nil {
		return c == nil && o == nil
	}
	return slices.Equal(c.Allow, o.Allow) && slices.Equal(c.Deny, o.Deny)
}

func (c *Clients) String() string {
	var parts []string
	if len(c.Allow) > 0 {
		parts = append(parts, "clients in "+strings.Join(c.Allow, ","))
	}
	if len(c.Deny) > 0 {
		parts = append(parts, "clients not in "+strings.Join(c.Deny, ","))
	}
	return strings.Join(parts, ", ")
}

func clientsOf(rule porticov1alpha1.Rule) *Clients {
	c := rule.ClientAddresses
	if c == nil {
		return nil
	}
	blocks := func(in []porticov1alpha1.AddressBlock) []string {
		out := make([]string, 0, len(in))
		for _, b := range in {
			out = append(out, string(b))
		}
		return slices.Compact(slices.Sorted(slices.Values(out)))
	}
	return &Clients{Allow: blocks(c.Allow), Deny: blocks(c.Deny)}
}

// ForwardedFor is the X-Forwarded-For the gateway sends with the requests
// of a rule with clientAddresses: only the client's address as the gateway
// determined it, trusting the proxies it was told to trust (Envoy's
// downstream remote address, which its xff_num_trusted_hops derives). The
// backend's sidecar reads a request's remote.ip from the last entry of
// X-Forwarded-For; without this, that entry is the gateway's own peer (a
// load balancer's address when proxies stand in front of it).
const ForwardedFor = "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"

// ForwardedForHeader is the header ForwardedFor is set on.
const ForwardedForHeader = "x-forwarded-for"

// GatewayNamespace is the namespace of the plan's Istio Gateway, whose
// pods the client-address rules require requests to come from: Istio
// reads "name" alone as a Gateway of the VirtualService's namespace.
func (p *Plan) GatewayNamespace() string {
	if ns, _, ok := strings.Cut(p.Gateway, "/"); ok {
		return ns
	}
	return p.APIRule.Namespace
}
