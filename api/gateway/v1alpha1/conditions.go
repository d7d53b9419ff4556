package v1alpha1

// ConditionReady is the Ready condition of APIRules and RateLimits.
const ConditionReady = "Ready"

// The RateLimit's conditions after the Gateway API's policy conventions
// (GEP-713), beside Ready.
const (
	// ConditionAccepted tells whether the RateLimit's target accepts it:
	// True with ReasonAccepted; False with ReasonTargetNotFound,
	// ReasonConflicted or ReasonInvalid.
	ConditionAccepted = "Accepted"
	// ConditionEnforced tells whether an accepted RateLimit is in force:
	// True with ReasonEnforced; False with ReasonNotEnforced (also while
	// the RateLimit is not accepted) or ReasonEnvoyFilterFailed.
	ConditionEnforced = "Enforced"
)

// APIRule's Ready condition reasons.
const (
	// ReasonApplied (True): the VirtualService and, for every backend
	// workload, the AuthorizationPolicy and (with JWT rules)
	// RequestAuthentication match the APIRule.
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
	// ReasonConflict (False): an Istio object the APIRule needs already
	// exists and was not created for this APIRule (another APIRule's, or an
	// administrator's); the message names it. The controller leaves it
	// untouched and writes nothing else until it is gone or renamed.
	ReasonConflict = "Conflict"
	// ReasonReferenceNotPermitted (False): a rule routes to a Service in
	// another namespace that does not exist or does not list the APIRule's
	// namespace in its gateway.portico.dev/allowed-apirule-namespaces
	// annotation; nothing is written.
	ReasonReferenceNotPermitted = "ReferenceNotPermitted"
	// ReasonBackendNotPermitted (False): a backend Service is an alias of
	// somewhere else (type ExternalName, no pod selector, endpoints that are
	// not pods of its own namespace, a WorkloadEntry its selector picks, or
	// a ServiceEntry declaring its host),
	// so traffic would not land on the workload the access rules protect.
	// The APIRule's Istio objects are removed.
	ReasonBackendNotPermitted = "BackendNotPermitted"
	// ReasonHostOccupied (False): an older APIRule already claims a host of
	// this one, exactly or through a wildcard; a host has one owner
	// cluster-wide. The APIRule's Istio objects are removed; it is applied
	// once the owner lets the host go.
	ReasonHostOccupied = "HostOccupied"
	// ReasonHostNotPermitted (False): a wildcard host ("*.example.com") is
	// not granted to the APIRule's namespace by the cluster administrator
	// (APIGateway spec.apiRules.wildcardHosts or ownedHosts), or a host
	// reaches names the administrator gave to other namespaces
	// (spec.apiRules.ownedHosts). The APIRule's Istio objects are removed.
	ReasonHostNotPermitted = "HostNotPermitted"
	// ReasonNoDefaultGateway (False): the APIRule names no gateway and the
	// APIGateway has no enabled default gateway (spec.gateway) to use
	// instead. The APIRule's Istio objects are removed.
	ReasonNoDefaultGateway = "NoDefaultGateway"
	// ReasonHostNotOnGateway (False): the APIRule is on the default gateway
	// (it names no gateway) and a host of it, named in the message, is not a
	// name directly under the gateway's domain (covered by *.<domain>), so
	// the gateway would not serve it. The APIRule's Istio objects are
	// removed.
	ReasonHostNotOnGateway = "HostNotOnGateway"
	// ReasonHostReserved (False): a host is one Portico reserves for
	// itself, on every gateway: the default gateway's health host
	// healthz.<domain>. The APIRule's Istio objects are removed.
	ReasonHostReserved = "HostReserved"
	// ReasonAuthorizerNotPermitted (False): a rule's extAuth names an
	// external authorizer that the cluster administrator has not granted to
	// the APIRule's namespace (APIGateway spec.apiRules.extAuthProviders),
	// or that is not granted at all. The APIRule's Istio objects are
	// removed.
	ReasonAuthorizerNotPermitted = "AuthorizerNotPermitted"
	// ReasonAccessConflict (False): on a workload both may reach, a rule of
	// this APIRule would let callers into requests that a live policy of
	// another APIRule of the namespace guards with other authentication, or
	// would add another key set for an issuer that policy trusts. Istio adds
	// up the policies of a workload, so nothing is written; the live Istio
	// objects stay as they were.
	ReasonAccessConflict = "AccessConflict"
	// ReasonGatewayAPINotInstalled (False): the APIRule names a Gateway API
	// Gateway (spec.parentRef), but the Gateway API's HTTPRoute or
	// ReferenceGrant CRD is not installed. The APIRule waits for them; its
	// objects stay as they were.
	ReasonGatewayAPINotInstalled = "GatewayAPINotInstalled"
	// ReasonRoutePending (False): the HTTPRoute is written, and the
	// controller of its Gateway has not yet reported on this version of it
	// (no Accepted condition for its generation).
	ReasonRoutePending = "RoutePending"
	// ReasonRouteNotAccepted (False): the Gateway's controller did not
	// accept the HTTPRoute, or could not resolve its references; the message
	// gives the Gateway's reason and message. The objects stay in place: the
	// Gateway may accept the route once its listeners allow it.
	ReasonRouteNotAccepted = "RouteNotAccepted"
)

// ConditionHostShared is an APIRule condition in HTTPRoute mode: True when
// an HTTPRoute that Portico did not write claims one of the APIRule's hosts
// on the same Gateway. The Gateway merges the rules of every route of a
// host, so requests to the host may be served by the other route.
const ConditionHostShared = "HostShared"

// ConditionHostShared reasons.
const (
	// ReasonForeignRoute (True): another HTTPRoute claims a host of the
	// APIRule on its Gateway.
	ReasonForeignRoute = "ForeignRoute"
	// ReasonNoForeignRoute (False): no other HTTPRoute does.
	ReasonNoForeignRoute = "NoForeignRoute"
)

// EventLookAlikeIgnored is the reason of the Warning Event an APIRule or a
// RateLimit gets when objects carry the labels of the objects Portico
// writes for it but Portico did not write them: they are left alone (never
// updated, deleted or waited for). The Event counts them and names none.
const EventLookAlikeIgnored = "LookAlikeIgnored"

// RateLimit's Accepted condition reasons of its own (GEP-713's
// TargetNotFound and Conflicted are ReasonTargetNotFound and
// ReasonConflicted below).
const (
	// ReasonAccepted (Accepted True): the target exists and no older
	// RateLimit holds the scope this one limits.
	ReasonAccepted = "Accepted"
	// ReasonInvalid (Accepted False, and Ready False): the RateLimit names
	// its target in a way the controller cannot act on, which admission
	// could not check (a RateLimit admitted before a rule existed).
	ReasonInvalid = "Invalid"
)

// RateLimit's Ready condition reasons; Enforced, NotEnforced and
// EnvoyFilterFailed are the Enforced condition's reasons too, TargetNotFound
// and Conflicted the Accepted condition's.
const (
	// ReasonEnforced (True): the limit is part of the EnvoyFilter(s) written
	// where its gateway's pods run.
	ReasonEnforced = "Enforced"
	// ReasonNotEnforced (False): an EnvoyFilter would limit nothing or too
	// much, so none is written: no pod matches the gateway's selector (the
	// message names it), the gateway has no selector, or a gateway-wide
	// limit's pods also serve gateways of other namespaces. For a Gateway
	// API Gateway, no pod labelled gateway.networking.k8s.io/gateway-name
	// with its name runs (Istio deploys none for a Gateway of another
	// implementation, or one given an existing address).
	ReasonNotEnforced = "NotEnforced"
	// ReasonTargetNotFound (False): the target APIRule or Gateway (or an
	// APIRule's gateway) does not exist, or the CRD of its kind is not
	// installed.
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonConflicted (False): an older RateLimit, named in the message,
	// already limits the same scope of the same gateway pods (the same route,
	// or the whole gateway; a gateway-wide limit and route limits on the same
	// pods conflict too, as a route's bucket replaces the gateway-wide one in
	// Envoy); this one is not applied.
	ReasonConflicted = "Conflicted"
	// ReasonEnvoyFilterFailed (False): writing an EnvoyFilter failed, or an
	// EnvoyFilter of the same name that the controller does not manage
	// exists (a conflict: it is left untouched).
	ReasonEnvoyFilterFailed = "EnvoyFilterFailed"
)
