package explain

import (
	"fmt"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
)

// DefaultRootNamespace is Istio's default root namespace
// (meshConfig.rootNamespace).
const DefaultRootNamespace = "istio-system"

// Policies are the security objects stored in a cluster.
type Policies struct {
	AuthorizationPolicies  []*securityv1.AuthorizationPolicy
	RequestAuthentications []*securityv1.RequestAuthentication
	// RootNamespace is Istio's root namespace; DefaultRootNamespace when empty.
	RootNamespace string
}

// Judge decides whether Istio lets the request reach the workload's pod.
// An error means a policy that applies uses something the judge does not
// model; it never guesses.
func Judge(p Policies, r Request) (Verdict, error) {
	if r.From == (Peer{}) {
		r.From = IngressGateway
	}
	byAction := map[securityv1beta1.AuthorizationPolicy_Action][]*securityv1.AuthorizationPolicy{}
	for _, ap := range p.AuthorizationPolicies {
		if p.applies(ap.Namespace, ap.Spec.Selector, len(ap.Spec.TargetRefs) > 0 || ap.Spec.TargetRef != nil, r.Workload) {
			byAction[ap.Spec.Action] = append(byAction[ap.Spec.Action], ap)
		}
	}
	// CUSTOM is delegated to an external authorizer: taken as a DENY, so
	// that the judge never calls open what an authorizer might close. The
	// sidecar asks the authorizer before it validates tokens (Istio puts
	// the ext_authz filter before jwt_authn), so CUSTOM rules see no
	// request principal and a matching request with a bad token is the
	// authorizer's to answer first.
	if v, err := firstMatch(byAction[securityv1beta1.AuthorizationPolicy_CUSTOM], r, identity{}); v != nil || err != nil {
		return verdictOf(v), err
	}
	var ras []*securityv1.RequestAuthentication
	for _, ra := range p.RequestAuthentications {
		if p.applies(ra.Namespace, ra.Spec.Selector, len(ra.Spec.TargetRefs) > 0 || ra.Spec.TargetRef != nil, r.Workload) {
			ras = append(ras, ra)
		}
	}
	id, rejected := authenticate(ras, r)
	if rejected != nil {
		return *rejected, nil
	}
	if v, err := firstMatch(byAction[securityv1beta1.AuthorizationPolicy_DENY], r, id); v != nil || err != nil {
		return verdictOf(v), err
	}
	allows := byAction[securityv1beta1.AuthorizationPolicy_ALLOW]
	if len(allows) == 0 {
		return Verdict{Decision: Allowed, Reason: "no ALLOW policy applies to the workload" + principalNote(id)}, nil
	}
	for _, ap := range allows {
		matched, err := policyMatches(ap, r, id)
		if err != nil {
			return Verdict{}, err
		}
		if matched >= 0 {
			return Verdict{Decision: Allowed, Reason: fmt.Sprintf("ALLOW policy %s/%s rule %d matches%s", ap.Namespace, ap.Name, matched, principalNote(id))}, nil
		}
	}
	return Verdict{Decision: Forbidden, Reason: fmt.Sprintf("no rule of the ALLOW policies applying (%s) matches%s", names(allows), principalNote(id))}, nil
}

// firstMatch returns the Forbidden verdict of the first of the CUSTOM or
// DENY policies with a rule that matches the request, or nil.
func firstMatch(aps []*securityv1.AuthorizationPolicy, r Request, id identity) (*Verdict, error) {
	for _, ap := range aps {
		matched, err := policyMatches(ap, r, id)
		if err != nil {
			return nil, err
		}
		if matched >= 0 {
			v := &Verdict{Decision: Forbidden, Reason: fmt.Sprintf("%s policy %s/%s rule %d matches", ap.Spec.Action, ap.Namespace, ap.Name, matched)}
			if ap.Spec.Action == securityv1beta1.AuthorizationPolicy_CUSTOM {
				v.Authorizer = ap.Spec.GetProvider().GetName()
				v.Reason += fmt.Sprintf(": the external authorizer %s decides", v.Authorizer)
			}
			return v, nil
		}
	}
	return nil, nil
}

func verdictOf(v *Verdict) Verdict {
	if v == nil {
		return Verdict{}
	}
	return *v
}

// applies reports whether a policy of a namespace, with a selector, applies
// to a sidecar workload. Policies attached by targetRefs apply to gateways
// and waypoints, not to sidecars selected by labels.
func (p Policies) applies(namespace string, selector *typev1beta1.WorkloadSelector, targeted bool, w Workload) bool {
	root := p.RootNamespace
	if root == "" {
		root = DefaultRootNamespace
	}
	if targeted || (namespace != w.Namespace && namespace != root) {
		return false
	}
	return selects(selector.GetMatchLabels(), w.Labels)
}

// policyMatches returns the index of the first rule of the policy that
// matches the request, or -1. A policy without rules matches nothing.
func policyMatches(ap *securityv1.AuthorizationPolicy, r Request, id identity) (int, error) {
	for i, rule := range ap.Spec.Rules {
		ok, err := ruleMatches(rule, r, id)
		if err != nil {
			return -1, fmt.Errorf("AuthorizationPolicy %s/%s rule %d: %w", ap.Namespace, ap.Name, i, err)
		}
		if ok {
			return i, nil
		}
	}
	return -1, nil
}

func principalNote(id identity) string {
	if p := id.principal(); p != "" {
		return " (request principal " + p + ")"
	}
	return " (no request principal)"
}

type named interface {
	GetNamespace() string
	GetName() string
}

func names[T named](objs []T) string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetNamespace() + "/" + o.GetName()
	}
	return strings.Join(out, ", ")
}
