package v1alpha1

// ExtAuth hands the authorization of a rule's requests to an external
// authorizer: an Istio mesh extension provider that the cluster
// administrator grants to the APIRule's namespace (APIGateway
// spec.apiRules.extAuthProviders).
type ExtAuth struct {
	// authorizers names the Istio mesh extension provider (meshConfig
	// extensionProviders) that decides on the rule's requests, a DNS label
	// (Istio refuses a provider of any other name and denies the requests
	// its CUSTOM policies match). Exactly one:
	// Istio calls a single provider per workload for its CUSTOM policies,
	// so every extAuth rule on one backend names the same authorizer (else
	// InvalidRule), and another APIRule's authorizer on the same pods is
	// refused (AccessConflict). An authorizer the administrator has not
	// granted to the APIRule's namespace (APIGateway
	// spec.apiRules.extAuthProviders) is refused with
	// AuthorizerNotPermitted and the APIRule's Istio objects are removed.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Authorizers []string `json:"authorizers"`

	// restrictions also require a valid JSON Web Token, as jwt does (either
	// form), once the authorizer has allowed the request: the authorizer
	// decides first, then the token's issuer and claims are checked.
	// Without restrictions every request the authorizer allows passes.
	// +optional
	Restrictions *JWTAuthentication `json:"restrictions,omitempty"`
}

// Authorizer is the extension provider of an extAuth rule, or "" for
// another rule.
func (r Rule) Authorizer() string {
	if r.ExtAuth == nil || len(r.ExtAuth.Authorizers) == 0 {
		return ""
	}
	return r.ExtAuth.Authorizers[0]
}

// TokenRequirement is the JSON Web Token a rule requires: its jwt, or the
// restrictions of its extAuth; nil when it requires none.
func (r Rule) TokenRequirement() *JWTAuthentication {
	if r.JWT != nil {
		return r.JWT
	}
	if r.ExtAuth != nil {
		return r.ExtAuth.Restrictions
	}
	return nil
}
