package v1alpha1

// ConditionReady is the Ready condition of APIRules and RateLimits.
const ConditionReady = "Ready"

// APIRule's Ready condition reasons.
const (
	// ReasonApplied (True): the VirtualService, AuthorizationPolicy and, with
	// JWT rules, RequestAuthentication match the APIRule.
	ReasonApplied = "Applied"
	// ReasonServiceNotFound (False): a referenced Service does not exist; the
	// live Istio objects are left as they were.
	ReasonServiceNotFound = "ServiceNotFound"
	// ReasonGatewayNotFound (False): the referenced Istio Gateway does not exist.
	ReasonGatewayNotFound = "GatewayNotFound"
	// ReasonInvalidRule (False): a rule is invalid in a way the API server
	// could not check; the live Istio objects are left as they were.
	ReasonInvalidRule = "InvalidRule"
	// ReasonApplyFailed (False): writing an Istio object failed; the
	// message has the API server's error.
	ReasonApplyFailed = "ApplyFailed"
)

// RateLimit's Ready condition reasons.
const (
	// ReasonEnforced (True): the limit is part of its gateway's EnvoyFilter.
	ReasonEnforced = "Enforced"
	// ReasonTargetNotFound (False): the target APIRule or Gateway does not exist.
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonConflicted (False): an older RateLimit already limits the same
	// gateway and path; this one is not applied.
	ReasonConflicted = "Conflicted"
	// ReasonEnvoyFilterFailed (False): writing the gateway's EnvoyFilter failed.
	ReasonEnvoyFilterFailed = "EnvoyFilterFailed"
)
