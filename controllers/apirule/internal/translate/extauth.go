package translate

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// extAuthSuffix ends the name of a backend's CUSTOM AuthorizationPolicy.
const extAuthSuffix = "-extauth"

// ExtAuthPolicyName is the name of the AuthorizationPolicy with action
// CUSTOM of one backend: its PolicyName followed by "-extauth", shortened
// with a hash beyond 63 characters.
func ExtAuthPolicyName(r *gatewayv1alpha1.APIRule, backend types.NamespacedName) string {
	return CustomPolicyOf(PolicyName(r, backend))
}

// CustomPolicyOf is the name of the CUSTOM AuthorizationPolicy beside the
// ALLOW policy named allowPolicy.
func CustomPolicyOf(allowPolicy string) string {
	return shortened(allowPolicy + extAuthSuffix)
}

// Authorizers lists the external authorizers the APIRule's rules name,
// sorted, each once: what the administrator must have granted to its
// namespace.
func Authorizers(r *gatewayv1alpha1.APIRule) []string {
	var out []string
	for _, rule := range r.Spec.Rules {
		if rule.ExtAuth != nil {
			out = append(out, rule.ExtAuth.Authorizers...)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// checkAuthorizers rejects what Istio cannot enforce: two authorizers on
// pods that rules of the APIRule may share (Istio calls a single extension
// provider per workload for CUSTOM policies), and an extAuth rule routed
// to another namespace's Service, where the APIRule writes no access
// policy, so the authorizer would never be asked.
func checkAuthorizers(r *gatewayv1alpha1.APIRule, selectors map[types.NamespacedName]map[string]string) error {
	for i, a := range r.Spec.Rules {
		if a.Authorizer() == "" {
			continue
		}
		for _, wa := range backendsOf(r, a) {
			if wa.Namespace == r.Namespace {
				continue
			}
			return fmt.Errorf("rule %s hands its requests to authorizer %s, but routes to service %s of another namespace, "+
				"where the APIRule writes no access policy: the authorizer would never be asked; route to a Service of namespace %s, "+
				"or let the Service's own namespace set its access policies", a.Path, a.Authorizer(), wa, r.Namespace)
		}
		for _, b := range r.Spec.Rules[i+1:] {
			if b.Authorizer() == "" || b.Authorizer() == a.Authorizer() {
				continue
			}
			if wb, shared := sharedWorkload(r, a, b, selectors); shared {
				return fmt.Errorf("rules %s and %s hand requests to authorizers %s and %s on pods they may share (those of service %s): "+
					"Istio calls one external authorizer per workload; use the same authorizer for both",
					a.Path, b.Path, a.Authorizer(), b.Authorizer(), wb)
			}
		}
	}
	return nil
}

// customPolicy hands the requests of the extAuth rules routed to one
// backend to their authorizer: an AuthorizationPolicy with action CUSTOM,
// on the paths the backend sees (BackendPath) and the rules' methods only.
// Istio evaluates CUSTOM policies before ALLOW ones, so the authorizer
// decides first, then the ALLOW policy (authorizationPolicy) must still
// admit the request. It returns nil without extAuth rules on the backend.
func customPolicy(r *gatewayv1alpha1.APIRule, backend types.NamespacedName, selector map[string]string) *securityv1.AuthorizationPolicy {
	var provider string
	var rules []*securityv1beta1.Rule
	for _, exposed := range orderedRules(r) {
		if exposed.Authorizer() == "" || !servesBackend(r, exposed, backend) {
			continue
		}
		// checkAuthorizers made it one authorizer per workload.
		provider = exposed.Authorizer()
		op := &securityv1beta1.Operation{Paths: []string{BackendPath(exposed)}, Methods: methodStrings(exposed.Methods)}
		rules = append(rules, &securityv1beta1.Rule{To: []*securityv1beta1.Rule_To{{Operation: op}}})
	}
	if len(rules) == 0 {
		return nil
	}
	ap := &securityv1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy"},
		ObjectMeta: objectMeta(r, backend.Namespace, ExtAuthPolicyName(r, backend)),
	}
	spec := &ap.Spec
	spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(selector)}
	spec.Action = securityv1beta1.AuthorizationPolicy_CUSTOM
	spec.ActionDetail = &securityv1beta1.AuthorizationPolicy_Provider{Provider: &securityv1beta1.AuthorizationPolicy_ExtensionProvider{Name: provider}}
	spec.Rules = rules
	return ap
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
				policyName(custom), op, providerOf(custom), policyName(other.Allow), callerOf(ra))
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
