package envoy

import (
	"fmt"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// The HTTP filters a sidecar's inbound chain is evaluated through; others
// (stats, metadata exchange, fault, cors, router) decide no access.
const (
	FilterJWTAuthn = "envoy.filters.http.jwt_authn"
	FilterRBAC     = "envoy.filters.http.rbac"
	FilterExtAuthz = "envoy.filters.http.ext_authz"
)

// Decision is what an inbound chain does with a request.
type Decision string

// The decisions of an inbound chain.
const (
	// Allowed: the request reaches the application.
	Allowed Decision = "allowed"
	// Unauthenticated: jwt_authn answers 401.
	Unauthenticated Decision = "rejected (401)"
	// Denied: an RBAC filter answers 403.
	Denied Decision = "denied (403)"
	// ToAuthorizer: an ext_authz filter is enabled for the request and
	// the caller gave no Authorizer to ask.
	ToAuthorizer Decision = "sent to the external authorizer"
	// DeniedByAuthorizer: the caller's Authorizer said no (and answered).
	DeniedByAuthorizer Decision = "denied by the external authorizer"
)

// Authorizer asks the external authorizer an ext_authz filter names,
// for the request; false stops the chain (the Authorizer has answered).
type Authorizer func(cfg *extauthzv3.ExtAuthz) (bool, error)

// Outcome is a chain's decision, the filter that made it and why.
type Outcome struct {
	Decision Decision
	Filter   string
	Reason   string
	// Metadata is the dynamic metadata the filters wrote.
	Metadata Metadata
}

// Evaluate runs a request through an inbound chain's HTTP filters in
// order, as Envoy does: jwt_authn (a token found but not verified, or a
// missing required one, is a 401; verified payloads become metadata);
// RBAC (ALLOW denies what no policy matches, DENY what one does, LOG
// nothing; shadow rules only write <prefix>shadow_effective_policy_id and
// <prefix>shadow_engine_result); ext_authz when its filter_enabled_metadata
// holds (or it has none): the Authorizer decides, or without one the
// outcome is ToAuthorizer.
func Evaluate(filters []*hcmv3.HttpFilter, r AccessRequest, verify Verifier, authorize Authorizer) (Outcome, error) {
	if r.Metadata == nil {
		r.Metadata = Metadata{}
	}
	for _, f := range filters {
		if f.GetDisabled() {
			continue
		}
		var out *Outcome
		var err error
		switch f.GetName() {
		case FilterJWTAuthn:
			out, err = evalJWT(f, &r, verify)
		case FilterRBAC:
			out, err = evalRBAC(f, r)
		case FilterExtAuthz:
			out, err = evalExtAuthz(f, r, authorize)
		default:
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("filter %s: %w", f.GetName(), err)
		}
		if out != nil {
			out.Filter, out.Metadata = f.GetName(), r.Metadata
			return *out, nil
		}
	}
	return Outcome{Decision: Allowed, Metadata: r.Metadata}, nil
}

func evalJWT(f *hcmv3.HttpFilter, r *AccessRequest, verify Verifier) (*Outcome, error) {
	cfg := &jwtauthnv3.JwtAuthentication{}
	if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		return nil, err
	}
	res, err := JWTAuthenticate(cfg, r.Request, verify)
	if err != nil {
		return nil, err
	}
	if !res.Passed {
		return &Outcome{Decision: Unauthenticated, Reason: res.Reason}, nil
	}
	for key, payload := range res.Metadata {
		r.Metadata.set(FilterJWTAuthn, key, payload)
	}
	return nil, nil
}

func evalRBAC(f *hcmv3.HttpFilter, r AccessRequest) (*Outcome, error) {
	cfg := &rbacfilterv3.RBAC{}
	if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		return nil, err
	}
	if cfg.GetMatcher() != nil || cfg.GetShadowMatcher() != nil {
		return nil, fmt.Errorf("RBAC matchers are not modelled")
	}
	if shadow := cfg.GetShadowRules(); shadow != nil {
		matched, err := MatchingPolicy(shadow, r)
		if err != nil {
			return nil, fmt.Errorf("shadow rules: %w", err)
		}
		prefix := cfg.GetShadowRulesStatPrefix()
		result := engineResult(shadow.GetAction().String(), matched)
		r.Metadata.set(FilterRBAC, prefix+"shadow_engine_result", result)
		if matched != "" {
			r.Metadata.set(FilterRBAC, prefix+"shadow_effective_policy_id", matched)
		}
	}
	rules := cfg.GetRules()
	if rules == nil {
		return nil, nil
	}
	matched, err := MatchingPolicy(rules, r)
	if err != nil {
		return nil, err
	}
	switch action := rules.GetAction().String(); {
	case action == "DENY" && matched != "":
		return &Outcome{Decision: Denied, Reason: "DENY policy " + matched}, nil
	case action == "ALLOW" && matched == "":
		return &Outcome{Decision: Denied, Reason: "no ALLOW policy matches"}, nil
	}
	return nil, nil
}

// engineResult is what an RBAC engine with action would decide.
func engineResult(action, matched string) string {
	if (action == "ALLOW") == (matched != "") || action == "LOG" {
		return "allowed"
	}
	return "denied"
}

func evalExtAuthz(f *hcmv3.HttpFilter, r AccessRequest, authorize Authorizer) (*Outcome, error) {
	cfg := &extauthzv3.ExtAuthz{}
	if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		return nil, err
	}
	if m := cfg.GetFilterEnabledMetadata(); m != nil {
		ok, err := MetadataMatches(m, r.Metadata)
		if err != nil || !ok {
			return nil, err
		}
	}
	if cfg.GetFilterEnabled() != nil || cfg.GetDenyAtDisable() != nil {
		return nil, fmt.Errorf("ext_authz runtime fractions are not modelled")
	}
	policy, _ := r.Metadata[FilterRBAC]
	reason := fmt.Sprintf("enabled by %v", policy)
	if authorize == nil {
		return &Outcome{Decision: ToAuthorizer, Reason: reason}, nil
	}
	ok, err := authorize(cfg)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &Outcome{Decision: DeniedByAuthorizer, Reason: reason}, nil
	}
	return nil, nil
}
