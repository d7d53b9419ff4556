package hosts

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Claim is one APIRule's claim on its hosts.
type Claim struct {
	APIRule types.NamespacedName
	// UID breaks ties between claims created in the same second.
	UID     types.UID
	Created time.Time
	Hosts   []string
}

// Grants is what the cluster administrator gave namespaces.
type Grants struct {
	// Wildcard reports whether a wildcard host is granted to a namespace
	// (nil: none is).
	Wildcard func(host, namespace string) bool
	// Owned are the names given to some namespaces only.
	Owned []Ownership
}

// Ownership gives the names a host covers (the host itself and, for a
// wildcard, every name under it) to namespaces; "*" is every namespace.
type Ownership struct {
	Host       string
	Namespaces []string
}

func (o Ownership) includes(namespace string) bool {
	return slices.Contains(o.Namespaces, "*") || slices.Contains(o.Namespaces, namespace)
}

// permitted reports whether a namespace may claim a wildcard host.
func (g Grants) permitted(wildcard, namespace string) bool {
	if g.Wildcard != nil && g.Wildcard(wildcard, namespace) {
		return true
	}
	return slices.ContainsFunc(g.Owned, func(o Ownership) bool { return o.Host == wildcard && o.includes(namespace) })
}

// ownedByOthers reports whether host can name a request's host that an
// ownership entry gives to other namespaces than namespace.
func (g Grants) ownedByOthers(host, namespace string) bool {
	return slices.ContainsFunc(g.Owned, func(o Ownership) bool { return !o.includes(namespace) && Overlap(host, o.Host) })
}

// holds reports whether a claim's host counts: a wildcard needs a grant,
// and no host may reach names owned by other namespaces.
func (g Grants) holds(host, namespace string) bool {
	return (!IsWildcard(host) || g.permitted(host, namespace)) && !g.ownedByOthers(host, namespace)
}

// Verdict is the outcome for one claim: empty Reason means it owns all its hosts.
type Verdict struct {
	// Reason is "", NotPermitted (an ungranted wildcard, or a name owned by
	// other namespaces) or Occupied.
	Reason  string
	Message string
}

// The verdict reasons.
const (
	NotPermitted = "NotPermitted"
	Occupied     = "Occupied"
)

// IsWildcard reports whether host is a wildcard ("*.example.com").
func IsWildcard(host string) bool { return strings.HasPrefix(host, "*.") }

// Overlap reports whether two hosts can name the same request's host: they
// are equal, or one is a wildcard covering the other (Envoy's "*.x" matches
// any name ending in ".x", also with several labels before it).
func Overlap(a, b string) bool {
	if a == b {
		return true
	}
	return covers(a, b) || covers(b, a)
}

func covers(wildcard, host string) bool {
	if !IsWildcard(wildcard) {
		return false
	}
	suffix := wildcard[1:] // ".example.com"
	return strings.HasSuffix(strings.TrimPrefix(host, "*"), suffix) && strings.TrimPrefix(host, "*") != suffix
}

// older orders claims: creation time, then UID (nobody chooses it), then
// namespace and name (claims without UID, in tests).
func older(a, b Claim) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if a.UID != b.UID {
		return a.UID < b.UID
	}
	if a.APIRule.Namespace != b.APIRule.Namespace {
		return a.APIRule.Namespace < b.APIRule.Namespace
	}
	return a.APIRule.Name < b.APIRule.Name
}

// Decide tells whether self owns every host it claims, given every other
// claim that may overlap (others may include self and claims in other
// zones; both are ignored). A message never names an APIRule or a
// namespace other than self's.
func Decide(self Claim, others []Claim, granted Grants) Verdict {
	ns := self.APIRule.Namespace
	for _, h := range self.Hosts {
		if granted.ownedByOthers(h, ns) {
			return Verdict{Reason: NotPermitted, Message: fmt.Sprintf(
				"host %s reaches names the cluster administrator gave to other namespaces (APIGateway spec.apiRules.ownedHosts); only their APIRules may claim them",
				h)}
		}
		if IsWildcard(h) && !granted.permitted(h, ns) {
			return Verdict{Reason: NotPermitted, Message: fmt.Sprintf(
				"wildcard host %s is not granted to namespace %s: the cluster administrator grants wildcard hosts in the APIGateway (spec.apiRules.wildcardHosts or ownedHosts)",
				h, ns)}
		}
	}
	contenders := slices.Clone(others)
	slices.SortFunc(contenders, func(a, b Claim) int {
		if older(a, b) {
			return -1
		}
		if older(b, a) {
			return 1
		}
		return 0
	})
	for _, other := range contenders {
		if other.APIRule == self.APIRule || !older(other, self) {
			continue
		}
		for _, h := range self.Hosts {
			for _, o := range other.Hosts {
				if !Overlap(h, o) || !granted.holds(o, other.APIRule.Namespace) {
					continue
				}
				return Verdict{Reason: Occupied, Message: occupiedMessage(self, other, h, o)}
			}
		}
	}
	return Verdict{}
}

func occupiedMessage(self, owner Claim, host, ownerHost string) string {
	if owner.APIRule.Namespace != self.APIRule.Namespace {
		// Nothing about the owner: not its namespace, name or other hosts.
		return fmt.Sprintf("host %s is already taken; a host has one owner, so this APIRule is not applied until the host is free", host)
	}
	how := ""
	if ownerHost != host {
		how = " through " + ownerHost
	}
	return fmt.Sprintf("host %s is already claimed by the older APIRule %s%s; a host has one owner, so this APIRule is not applied until the owner lets it go",
		host, owner.APIRule, how)
}
