package access

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/portico-dev/portico/controllers/apirule/internal/paths"
)

// AuthorizationConflict explains how ALLOW policy a would meet ALLOW policy b
// of the same namespace: on pods both may select, an operation of one is
// allowed to other callers than the same operation of the other. Istio
// allows a request when any ALLOW rule of any policy on the pod matches,
// so the laxer rule would open what the stricter one guards. Rules with the
// same operation are taken together: a jwt rule with several authorizations
// is one rule per alternative, and the same alternatives in both policies
// do not conflict. It returns "" when they cannot meet.
func AuthorizationConflict(a, b *securityv1.AuthorizationPolicy) string {
	if a.Namespace != b.Namespace || !selectorsMayOverlap(a.Spec.GetSelector(), b.Spec.GetSelector()) {
		return ""
	}
	if a.Spec.Action != securityv1beta1.AuthorizationPolicy_ALLOW || b.Spec.Action != securityv1beta1.AuthorizationPolicy_ALLOW {
		return ""
	}
	for _, ga := range groupByOperation(a.Spec.Rules) {
		for _, gb := range groupByOperation(b.Spec.Rules) {
			if sameCallers(ga, gb) {
				continue
			}
			if op, ok := operationsMeet(ga[0], gb[0]); ok {
				return fmt.Sprintf("%s and %s on the same pods allow %s to different callers (%s; %s)",
					policyName(a), policyName(b), op, callersOf(ga), callersOf(gb))
			}
		}
	}
	return ""
}

// groupByOperation groups the rules of a policy that have the same "to".
func groupByOperation(rules []*securityv1beta1.Rule) [][]*securityv1beta1.Rule {
	var groups [][]*securityv1beta1.Rule
	for _, r := range rules {
		i := slices.IndexFunc(groups, func(g []*securityv1beta1.Rule) bool {
			return proto.Equal(&securityv1beta1.Rule{To: g[0].To}, &securityv1beta1.Rule{To: r.To})
		})
		if i < 0 {
			groups = append(groups, []*securityv1beta1.Rule{r})
			continue
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// sameCallers reports whether two groups of rules admit the same callers:
// every rule of one demands what some rule of the other demands.
func sameCallers(a, b []*securityv1beta1.Rule) bool {
	covered := func(x, y []*securityv1beta1.Rule) bool {
		return !slices.ContainsFunc(x, func(rx *securityv1beta1.Rule) bool {
			return !slices.ContainsFunc(y, func(ry *securityv1beta1.Rule) bool { return sameCaller(rx, ry) })
		})
	}
	return covered(a, b) && covered(b, a)
}

func callersOf(rules []*securityv1beta1.Rule) string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = CallerOf(r)
	}
	return strings.Join(out, " or ")
}

// AuthenticationConflict explains how RequestAuthentication a would change
// what b trusts on pods both may select. Istio merges the JWT rules of a
// workload and accepts a token that any rule for its issuer validates, read
// from any place that rule names. So the same issuer with another key set
// lets tokens signed with either pass both, and the same issuer read from
// other places (another header, a query parameter) makes tokens found there
// count for both. It returns "" when they cannot meet.
func AuthenticationConflict(a, b *securityv1.RequestAuthentication) string {
	if a.Namespace != b.Namespace || !selectorsMayOverlap(a.Spec.GetSelector(), b.Spec.GetSelector()) {
		return ""
	}
	for _, ja := range a.Spec.JwtRules {
		for _, jb := range b.Spec.JwtRules {
			if ja.Issuer != jb.Issuer {
				continue
			}
			if ja.JwksUri != jb.JwksUri || ja.Jwks != jb.Jwks {
				return fmt.Sprintf("%s and %s on the same pods trust issuer %s with different key sets (%s; %s), so tokens signed with either would pass both",
					"RequestAuthentication "+a.Name, "RequestAuthentication "+b.Name, ja.Issuer, keySet(ja), keySet(jb))
			}
			if la, lb := jwtRuleLocations(ja), jwtRuleLocations(jb); !slices.Equal(la, lb) {
				return fmt.Sprintf("%s and %s on the same pods read tokens of issuer %s from different places (%s; %s), so a token found in either place would pass both",
					"RequestAuthentication "+a.Name, "RequestAuthentication "+b.Name, ja.Issuer, strings.Join(la, ", "), strings.Join(lb, ", "))
			}
		}
	}
	return ""
}

func keySet(j *securityv1beta1.JWTRule) string {
	if j.JwksUri != "" {
		return j.JwksUri
	}
	return "inline jwks"
}

func policyName(p *securityv1.AuthorizationPolicy) string { return "AuthorizationPolicy " + p.Name }

// selectorsMayOverlap reports whether two workload selectors of one
// namespace may select a common pod: no label both name with different
// values. A missing selector selects every pod.
func selectorsMayOverlap(a, b *typev1beta1.WorkloadSelector) bool {
	for k, v := range a.GetMatchLabels() {
		if w, ok := b.GetMatchLabels()[k]; ok && w != v {
			return false
		}
	}
	return true
}

// sameCaller reports whether two rules demand the same of the caller.
func sameCaller(a, b *securityv1beta1.Rule) bool {
	return proto.Equal(&securityv1beta1.Rule{From: a.From, When: a.When}, &securityv1beta1.Rule{From: b.From, When: b.When})
}

// CallerOf describes what an ALLOW rule demands of the caller.
func CallerOf(r *securityv1beta1.Rule) string {
	if len(r.From) == 0 && len(r.When) == 0 {
		return "anyone"
	}
	var parts []string
	for _, f := range r.From {
		src := f.GetSource()
		if p := src.GetRequestPrincipals(); len(p) > 0 {
			parts = append(parts, strings.Join(p, ","))
		}
		if b := src.GetRemoteIpBlocks(); len(b) > 0 {
			parts = append(parts, "clients in "+strings.Join(b, ","))
		}
		if b := src.GetNotRemoteIpBlocks(); len(b) > 0 {
			parts = append(parts, "clients not in "+strings.Join(b, ","))
		}
		if n := src.GetNamespaces(); len(n) > 0 {
			parts = append(parts, "through namespace "+strings.Join(n, ","))
		}
	}
	for _, w := range r.When {
		parts = append(parts, w.Key+"="+strings.Join(w.Values, ","))
	}
	return strings.Join(parts, " ")
}

// operationsMeet finds an operation both rules allow. A rule without "to"
// allows every operation; exclusions (notPaths, notMethods) are taken as
// allowing everything, which can only find more conflicts.
func operationsMeet(a, b *securityv1beta1.Rule) (string, bool) {
	for _, oa := range operations(a) {
		for _, ob := range operations(b) {
			if path, ok := opPathsMeet(oa.GetPaths(), ob.GetPaths()); ok && opMethodsMeet(oa.GetMethods(), ob.GetMethods()) {
				return path, true
			}
		}
	}
	return "", false
}

func operations(r *securityv1beta1.Rule) []*securityv1beta1.Operation {
	if len(r.To) == 0 {
		return []*securityv1beta1.Operation{{}}
	}
	ops := make([]*securityv1beta1.Operation, 0, len(r.To))
	for _, to := range r.To {
		ops = append(ops, to.GetOperation())
	}
	return ops
}

func opPathsMeet(a, b []string) (string, bool) {
	if len(a) == 0 {
		a = []string{"*"}
	}
	if len(b) == 0 {
		b = []string{"*"}
	}
	for _, p := range a {
		for _, q := range b {
			if istioPathsMeet(p, q) {
				return "path " + narrower(p, q), true
			}
		}
	}
	return "", false
}

// istioPathsMeet reports whether two AuthorizationPolicy path patterns
// (exact, "x*" prefix, "*x" suffix, "*", or a template) match a common
// path.
func istioPathsMeet(p, q string) bool {
	switch {
	case paths.IsTemplate(p) || paths.IsTemplate(q):
		return paths.Meet(p, q)
	case p == "*" || q == "*":
		return true
	case strings.HasPrefix(p, "*") || strings.HasPrefix(q, "*"):
		return true // suffix patterns: assume they meet
	case strings.HasSuffix(p, "*") && strings.HasSuffix(q, "*"):
		pp, qp := strings.TrimSuffix(p, "*"), strings.TrimSuffix(q, "*")
		return strings.HasPrefix(pp, qp) || strings.HasPrefix(qp, pp)
	case strings.HasSuffix(p, "*"):
		return strings.HasPrefix(q, strings.TrimSuffix(p, "*"))
	case strings.HasSuffix(q, "*"):
		return strings.HasPrefix(p, strings.TrimSuffix(q, "*"))
	}
	return p == q
}

func narrower(p, q string) string {
	if strings.HasSuffix(p, "*") && !strings.HasSuffix(q, "*") {
		return q
	}
	if len(q) > len(p) {
		return q
	}
	return p
}

func opMethodsMeet(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	return slices.ContainsFunc(a, func(m string) bool { return slices.Contains(b, m) })
}

// Access is one APIRule's access control on one workload: its ALLOW
// policy and, with extAuth rules, its CUSTOM policy (either may be nil).
type Access struct {
	Allow, Custom *securityv1.AuthorizationPolicy
}

// CustomConflict explains how the external authorization of one APIRule
// would meet the access control of another on pods both may select, or
// returns "". Istio calls one extension provider per workload, so two
// authorizers cannot share pods. And a CUSTOM policy applies to every
// request it matches, whoever allows it: an authorizer on an operation
// that the other APIRule allows without the same authorizer on that
// operation would decide on (and see) the other's requests, or the
// other's ALLOW rule would be the way around an authorizer that guards a
// path it covers.
func CustomConflict(a, b Access) string {
	if ca, cb := a.Custom, b.Custom; ca != nil && cb != nil && mayMeet(ca, cb) && providerOf(ca) != providerOf(cb) {
		return fmt.Sprintf("%s and %s on the same pods hand requests to the authorizers %s and %s; Istio calls one external authorizer per workload",
			policyName(ca), policyName(cb), providerOf(ca), providerOf(cb))
	}
	if c := customMeetsAllow(a.Custom, b); c != "" {
		return c
	}
	return customMeetsAllow(b.Custom, a)
}

// customMeetsAllow finds an operation of the CUSTOM policy custom that
// other's ALLOW policy allows without other's own CUSTOM policy guarding
// that very operation with the same authorizer.
func customMeetsAllow(custom *securityv1.AuthorizationPolicy, other Access) string {
	if custom == nil || other.Allow == nil || !mayMeet(custom, other.Allow) {
		return ""
	}
	for _, rc := range custom.Spec.Rules {
		for _, ra := range other.Allow.Spec.Rules {
			op, ok := operationsMeet(rc, ra)
			if !ok || guards(other.Custom, providerOf(custom), ra) {
				continue
			}
			return fmt.Sprintf("%s hands %s to authorizer %s, and %s on the same pods allows it to %s without that authorizer",
				policyName(custom), op, providerOf(custom), policyName(other.Allow), CallerOf(ra))
		}
	}
	return ""
}

// guards reports whether the CUSTOM policy custom hands every operation
// of the ALLOW rule allow to authorizer provider: one of its rules has the
// very same operations.
func guards(custom *securityv1.AuthorizationPolicy, provider string, allow *securityv1beta1.Rule) bool {
	if custom == nil || providerOf(custom) != provider {
		return false
	}
	return slices.ContainsFunc(custom.Spec.Rules, func(rc *securityv1beta1.Rule) bool {
		return proto.Equal(&securityv1beta1.Rule{To: rc.To}, &securityv1beta1.Rule{To: allow.To})
	})
}

func mayMeet(a, b *securityv1.AuthorizationPolicy) bool {
	return a.Namespace == b.Namespace && selectorsMayOverlap(a.Spec.GetSelector(), b.Spec.GetSelector())
}

// providerOf names the extension provider of a CUSTOM policy.
func providerOf(p *securityv1.AuthorizationPolicy) string {
	return p.Spec.GetProvider().GetName()
}

// IsCustom reports whether the policy hands requests to an external
// authorizer (action CUSTOM).
func IsCustom(p *securityv1.AuthorizationPolicy) bool {
	return p.Spec.Action == securityv1beta1.AuthorizationPolicy_CUSTOM
}
