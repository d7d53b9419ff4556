package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hostname is a fully qualified DNS name, optionally with a leading "*." wildcard.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$')",message="must be a lower-case DNS name such as api.example.com or *.example.com"
type Hostname string

// HTTPMethod is an HTTP request method.
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS
type HTTPMethod string

// AnnotationAllowedAPIRuleNamespaces is the Service annotation that lists
// the namespaces (comma separated, or "*" for all) whose APIRules may route
// to the Service from another namespace. Whoever may write the Service
// grants it.
const AnnotationAllowedAPIRuleNamespaces = "gateway.portico.dev/allowed-apirule-namespaces"

// ServiceReference points at a port of a Kubernetes Service.
type ServiceReference struct {
	// name of the Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// namespace of the Service; defaults to the APIRule's namespace. A
	// Service in another namespace must consent: its annotation
	// gateway.portico.dev/allowed-apirule-namespaces lists the namespaces
	// whose APIRules may route to it, comma separated ("team-a,team-b"), or
	// is "*" for every namespace. Without consent the APIRule is not applied
	// and its Istio objects are removed (reason ReferenceNotPermitted).
	// Consent grants routing only: the APIRule writes no access policy in
	// the other namespace, whose own AuthorizationPolicies and
	// RequestAuthentications decide who may call its pods; this APIRule's
	// noAuth and jwt settings apply to Services of its own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// port of the Service to route to.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// CORSPolicy is the cross-origin resource sharing policy of the exposed hosts.
type CORSPolicy struct {
	// allowOrigins are the origins allowed to call the API, matched exactly
	// ("https://app.example.com") or "*" for any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	AllowOrigins []string `json:"allowOrigins,omitempty"`

	// allowMethods may be used in cross-origin requests.
	// +optional
	// +listType=set
	AllowMethods []HTTPMethod `json:"allowMethods,omitempty"`

	// allowHeaders may be sent in cross-origin requests.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	AllowHeaders []string `json:"allowHeaders,omitempty"`

	// exposeHeaders the browser may read from responses.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`

	// allowCredentials lets cross-origin requests carry credentials.
	// +optional
	AllowCredentials *bool `json:"allowCredentials,omitempty"`

	// maxAge is how long a preflight response may be cached: whole seconds
	// from 1s to 24h, such as 600s or 10m (Istio and browsers count seconds).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self != '' && self.matches('^([0-9]+([.][0-9]{1,2})?h)?([0-9]+([.][0-9])?m)?([0-9]+s)?$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="maxAge must be a whole number of seconds from 1s to 24h, such as 600s or 10m"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// JWTAuthentication requires a valid JSON Web Token on matching requests:
// the single-issuer form (issuer, jwksUri, audiences, requiredScopes) or
// the list form (authentications, authorizations), never both.
// +kubebuilder:validation:XValidation:rule="has(self.issuer) != has(self.authentications)",message="jwt needs either issuer and jwksUri (one issuer) or authentications (a list of issuers), not both"
// +kubebuilder:validation:XValidation:rule="has(self.issuer) == has(self.jwksUri)",message="issuer and jwksUri go together; with several issuers, list each under authentications"
// +kubebuilder:validation:XValidation:rule="!has(self.authentications) || (!has(self.audiences) && !has(self.requiredScopes))",message="with authentications, put audiences and requiredScopes under authorizations"
// +kubebuilder:validation:XValidation:rule="!has(self.authorizations) || has(self.authentications)",message="authorizations go with authentications; with a single issuer, use audiences and requiredScopes"
// +kubebuilder:validation:XValidation:rule="!has(self.authentications) || self.authentications.map(a, (has(a.fromHeaders) ? a.fromHeaders.size() : 0) + (has(a.fromParams) ? a.fromParams.size() : 0)).sum() <= 8",message="the issuers of a rule read tokens from at most 8 places in all (fromHeaders and fromParams)"
// +kubebuilder:validation:XValidation:rule="!has(self.authorizations) || self.authorizations.map(z, (has(z.requiredScopes) ? z.requiredScopes.size() : 0) + (has(z.audiences) ? z.audiences.size() : 0)).sum() <= 16",message="the authorizations of a rule name at most 16 scopes and audiences in all"
type JWTAuthentication struct {
	// issuer the token's iss claim must equal (single-issuer form, with
	// jwksUri).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Issuer string `json:"issuer,omitempty"`

	// jwksUri is the https URL of the issuer's JSON Web Key Set
	// (single-issuer form, with issuer).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https'",message="jwksUri must be an https URL"
	JWKSURI string `json:"jwksUri,omitempty"`

	// audiences of which the token's aud claim must contain at least one
	// (single-issuer form).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Audiences []string `json:"audiences,omitempty"`

	// requiredScopes the token's scope claim must all contain
	// (single-issuer form).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	RequiredScopes []string `json:"requiredScopes,omitempty"`

	// authentications are the issuers whose tokens the rule accepts (list
	// form, exclusive with issuer): a token valid for any one of them
	// passes authentication. Each issuer appears once; together they read
	// tokens from at most 8 places (an APIRule at its bounds must still fit
	// in one etcd object). On one workload an
	// issuer has one key set and one set of token locations: Istio merges
	// the RequestAuthentications of a workload, so another key set or
	// another location for the same issuer, in this APIRule or in another
	// one on the same pods, is refused (reasons InvalidRule and
	// AccessConflict).
	// +optional
	// +listType=map
	// +listMapKey=issuer
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Authentications []JWTIssuer `json:"authentications,omitempty"`

	// authorizations are alternatives the token's claims must satisfy
	// (list form): a request passes when its token satisfies any one entry,
	// and each entry needs all its requiredScopes and one of its audiences.
	// Without authorizations any valid token of the listed issuers passes.
	// At most 16 scopes and audiences in all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Authorizations []JWTAuthorization `json:"authorizations,omitempty"`
}

// JWTIssuer is one issuer a rule trusts, with its key set and where its
// tokens are read from.
// +kubebuilder:validation:XValidation:rule="!has(self.fromHeaders) || !has(self.fromParams) || self.fromHeaders.size() + self.fromParams.size() <= 4",message="an issuer reads its tokens from at most 4 places (fromHeaders and fromParams together)"
type JWTIssuer struct {
	// issuer the token's iss claim must equal (at most 256 characters).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Issuer string `json:"issuer"`

	// jwksUri is the https URL of the issuer's JSON Web Key Set (at most
	// 512 characters).
	// +required
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https'",message="jwksUri must be an https URL"
	JWKSURI string `json:"jwksUri"`

	// fromHeaders are the request headers the issuer's tokens are read
	// from. With neither fromHeaders nor fromParams, tokens are read from
	// Istio's default places: the Authorization header after "Bearer ", and
	// the access_token query parameter.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	FromHeaders []JWTHeader `json:"fromHeaders,omitempty"`

	// fromParams are the query parameters the issuer's tokens are read
	// from. A token in a URL may be written to access logs: prefer headers.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9._~-]+$`
	FromParams []string `json:"fromParams,omitempty"`
}

// JWTHeader is a request header a token is read from.
type JWTHeader struct {
	// name of the header, such as x-jwt-assertion (matched regardless of
	// case).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`

	// prefix before the token in the header's value, such as "Bearer "
	// (with its space); empty when the value is the token alone.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[ -~]*$`
	Prefix string `json:"prefix,omitempty"`
}

// JWTAuthorization is one alternative set of claims a token must have.
// +kubebuilder:validation:XValidation:rule="has(self.requiredScopes) || has(self.audiences)",message="an authorization needs requiredScopes or audiences; leave authorizations out to accept any valid token"
type JWTAuthorization struct {
	// requiredScopes the token's scope claim must all contain.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=128
	RequiredScopes []string `json:"requiredScopes,omitempty"`

	// audiences of which the token's aud claim must contain at least one.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=256
	Audiences []string `json:"audiences,omitempty"`
}

// Rule exposes one path of the API with its access control.
// +kubebuilder:validation:XValidation:rule="((has(self.noAuth) && self.noAuth) ? 1 : 0) + (has(self.jwt) ? 1 : 0) + (has(self.extAuth) ? 1 : 0) == 1",message="each rule needs exactly one of noAuth: true, jwt or extAuth"
// +kubebuilder:validation:XValidation:rule="!has(self.rewrite) || !has(self.rewrite.prefix) || self.path.endsWith('/*')",message="rewrite.prefix needs a prefix rule (a path ending in '/*'); rewrite an exact path with rewrite.path"
// +kubebuilder:validation:XValidation:rule="!(has(self.service) && has(self.backends))",message="set service or backends on a rule, not both: backends split the rule's requests between several Services"
// +kubebuilder:validation:XValidation:rule="!has(self.retries) || !has(self.retries.perTryTimeout) || !has(self.timeout) || duration(self.retries.perTryTimeout) <= duration(self.timeout)",message="retries.perTryTimeout may not exceed the rule's timeout, which bounds all tries together"
type Rule struct {
	// path of the request: exact ("/orders"), a prefix when it ends with
	// "/*" ("/orders/*"; "/*" matches every path), or a template with
	// Istio's path template operators as whole segments: "{*}" matches
	// exactly one non-empty segment ("/orders/{*}/items"), "{**}" any rest
	// of the path and only as the last segment ("/files/{**}"). A template
	// may not end with "/*". Which rule serves a request: an exact path,
	// then a template, then a prefix (the longer first). The controller
	// refuses (reason InvalidRule) a template that can match a path another
	// rule on the same pods allows with other authentication, since Istio
	// adds up access rules; the API server cannot compare templates within
	// its validation budget. With parentRef, a template may not meet a
	// prefix or another template with a method in common: the Gateway API
	// leaves the precedence of regular expression matches to the
	// implementation.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must start with '/'"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(/([-a-zA-Z0-9._~%!$&()+,;=:@]*|\\\\{\\\\*\\\\}))*(/\\\\*|/\\\\{\\\\*\\\\*\\\\})?$')",message="path may only contain URL path characters, with '*' allowed only in a final '/*' or in the templates '{*}' and '{**}' as whole segments, '{**}' only as the last"
	// +kubebuilder:validation:XValidation:rule="!self.contains('*') || self.endsWith('/*') || self.contains('{')",message="a wildcard path must end with '/*'"
	// +kubebuilder:validation:XValidation:rule="!self.contains('{') || !self.endsWith('/*')",message="a template path may not end with '/*': end it with '/{**}' for any rest of the path"
	Path string `json:"path"`

	// methods this rule allows; empty allows every method.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Methods []HTTPMethod `json:"methods,omitempty"`

	// service overrides spec.service for this path.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`

	// timeout of requests on this path; overrides spec.timeout. A duration
	// from 1ms to 1h in whole milliseconds (Istio rejects finer ones).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self != '' && self.matches('^([0-9]+([.][0-9]{1,5})?h)?([0-9]+([.][0-9]{1,4})?m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?$') && duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="timeout must be a duration from 1ms to 1h in whole milliseconds, such as 500ms, 15s or 1m30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// noAuth: true lets every request through without authentication.
	// +optional
	NoAuth *bool `json:"noAuth,omitempty"`

	// jwt requires a valid JSON Web Token, in one of two forms. The
	// single-issuer form names issuer and jwksUri, with optional audiences
	// and requiredScopes, and reads the token from Istio's default places
	// (the Authorization header after "Bearer ", or the access_token query
	// parameter). The list form names authentications (up to 4 issuers,
	// each with its key set and, optionally, the headers and query
	// parameters its tokens are read from) and optional authorizations: a
	// request passes when its token is valid for any of the issuers and, if
	// authorizations are listed, satisfies any one of them.
	// +optional
	JWT *JWTAuthentication `json:"jwt,omitempty"`

	// extAuth hands the rule's requests to an external authorizer granted
	// to the namespace (an Istio mesh extension provider, through an
	// AuthorizationPolicy with action CUSTOM on the rule's paths and
	// methods), optionally also requiring a JSON Web Token (restrictions).
	// Its type is in extauth_types.go.
	// +optional
	ExtAuth *ExtAuth `json:"extAuth,omitempty"`

	// Request modifiers (issue 32: retries, request headers and cookies,
	// rewrite); their types are in rulemods_types.go.

	// retries of failed requests on this path: attempts, an optional
	// per-try timeout, and the failures to retry on (status codes and
	// Envoy's retryOn conditions). Without it, the gateway's default
	// retries apply. Istio mode only: the HTTPRoute's retry field is in the
	// Gateway API's experimental channel, so an APIRule with parentRef is
	// refused with retries.
	// +optional
	Retries *RetryPolicy `json:"retries,omitempty"`

	// request headers and cookies the gateway sets before it forwards the
	// request: bounded in number and size; headers that carry identity,
	// routing or tracing are refused, so that no APIRule forges identity
	// for a backend. The cookies replace the client's cookie header.
	// +optional
	Request *RequestModifier `json:"request,omitempty"`

	// rewrite changes the path the backend receives: the whole path, or
	// the matched prefix of a prefix rule. The backend's access policy
	// sees the rewritten path: the rule's authentication applies there,
	// and a rewrite into a path that another rule on the same pods guards
	// with other authentication is refused (reason InvalidRule, or
	// AccessConflict for another APIRule's).
	// +optional
	Rewrite *Rewrite `json:"rewrite,omitempty"`

	// Traffic splitting (issue 32); the type is in weighted_types.go.

	// backends split the rule's requests between 2 to 8 Services by
	// percentage (weights adding up to 100), such as a canary taking 10% of
	// a path: exclusive with service. Every backend passes the checks of a
	// rule's service (reasons BackendNotPermitted, ReferenceNotPermitted
	// and, in HTTPRoute mode, a ReferenceGrant for another namespace), and
	// a refused backend refuses the whole APIRule. Every backend of the
	// APIRule's namespace gets the rule's access policy, even at weight 0,
	// and prefix rules covering a path are checked against the pods of
	// every backend. A Service and port appear once per rule.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.map(b, b.weight).sum() == 100",message="the weights of a rule's backends are percentages of its requests and must add up to 100"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.service == a.service))",message="a rule lists a backend (service, namespace and port) twice; give it the sum of the weights once"
	Backends []WeightedBackend `json:"backends,omitempty"`

	// Request matching (issue 32: header and query-parameter matches); its
	// types are in match_types.go.

	// match narrows the rule to requests that also carry the listed
	// headers and query parameters (at most 8 in all). It selects a route,
	// never access: two rules that can match the same request on the same
	// pods, whatever their matches, must have the same authentication, since
	// the backend's access policy cannot tell which route a request took
	// (reason InvalidRule, or AccessConflict for another APIRule's). Two
	// rules may share a path and a method when their matches differ; the
	// gateway tries the rule with more header matches, then more
	// query-parameter matches, first.
	// +optional
	Match *RequestMatch `json:"match,omitempty"`

	// Response headers and client addresses (issue 43); their types are in
	// headers_types.go.

	// response headers the gateway sets, adds or removes before it returns
	// the response, such as security headers (strict-transport-security,
	// content-security-policy) or removing server. Headers Envoy or the
	// APIRule's CORS policy own, and set-cookie, are refused. The rules of
	// an APIRule set, add and remove at most 64 response headers in all.
	// Both modes.
	// +optional
	Response *ResponseModifier `json:"response,omitempty"`

	// clientAddresses allows the rule's requests by the client's address
	// (allow and deny lists of IP addresses and CIDR blocks), as the
	// gateway determined it from X-Forwarded-For, trusting as many proxies
	// in front of it as the cluster administrator set (APIGateway
	// spec.apiRules.trustedProxies; until it is set, such rules are refused
	// with InvalidRule). It is part of the rule's access: the backend's
	// access policy requires it (Istio remoteIpBlocks) of requests that came
	// through the gateway's namespace, so pods elsewhere in the mesh, which
	// could write any X-Forwarded-For, no longer reach the rule, and rules
	// that can match one request on the same pods must have the same
	// clientAddresses. Istio mode only: a standard HTTPRoute cannot say it,
	// so an APIRule with parentRef is refused with it. The rules of an
	// APIRule list at most 64 blocks in all.
	// +optional
	ClientAddresses *ClientAddresses `json:"clientAddresses,omitempty"`
}

// GatewayAPIGroup is the API group of the Kubernetes Gateway API.
const GatewayAPIGroup = "gateway.networking.k8s.io"

// ParentReference names the Gateway API Gateway that serves an APIRule in
// HTTPRoute mode, as a Gateway API route's parentRef does.
type ParentReference struct {
	// group of the parent: gateway.networking.k8s.io, the Gateway API.
	// +optional
	// +kubebuilder:default=gateway.networking.k8s.io
	// +kubebuilder:validation:Enum=gateway.networking.k8s.io
	Group string `json:"group,omitempty"`

	// kind of the parent: Gateway.
	// +optional
	// +kubebuilder:default=Gateway
	// +kubebuilder:validation:Enum=Gateway
	Kind string `json:"kind,omitempty"`

	// namespace of the Gateway; defaults to the APIRule's namespace. A
	// Gateway of another namespace accepts the route only if its listener's
	// allowedRoutes admit the APIRule's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// sectionName is the name of one listener of the Gateway; empty
	// attaches the route to every listener that admits it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	SectionName string `json:"sectionName,omitempty"`
}

// MaxHTTPRouteRules is the most rules an APIRule in HTTPRoute mode may have:
// each becomes one rule of its HTTPRoute, which the Gateway API limits to 16.
const MaxHTTPRouteRules = 16

// APIRuleSpec is the desired exposure of a Service.
// +kubebuilder:validation:XValidation:rule="has(self.service) || self.rules.all(r, has(r.service) || has(r.backends))",message="set spec.service, or a service or backends on every rule"
// +kubebuilder:validation:XValidation:rule="!(has(self.gateway) && has(self.parentRef))",message="set gateway (an Istio Gateway) or parentRef (a Gateway API Gateway), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.parentRef) || self.rules.size() <= 16",message="an APIRule with parentRef has at most 16 rules: each becomes one rule of an HTTPRoute, which the Gateway API limits to 16"
// +kubebuilder:validation:XValidation:rule="!has(self.parentRef) || self.rules.all(r, !has(r.retries))",message="retries need Istio mode (gateway): the HTTPRoute's retry field is in the Gateway API's experimental channel only, so an APIRule with parentRef cannot have retries"
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || self.rules.all(r, has(r.timeout) || !has(r.retries) || !has(r.retries.perTryTimeout) || duration(r.retries.perTryTimeout) <= duration(self.timeout))",message="retries.perTryTimeout may not exceed spec.timeout, which bounds all tries of a rule without its own timeout"
// +kubebuilder:validation:XValidation:rule="!has(self.parentRef) || self.rules.all(r, !has(r.clientAddresses))",message="clientAddresses need Istio mode (gateway): a standard HTTPRoute cannot match the client's address, so an APIRule with parentRef cannot have them"
// +kubebuilder:validation:XValidation:rule="self.rules.map(r, has(r.response) ? (has(r.response.set) ? size(r.response.set) : 0) + (has(r.response.add) ? size(r.response.add) : 0) + (has(r.response.remove) ? size(r.response.remove) : 0) : 0).sum() <= 64",message="the rules of an APIRule set, add and remove at most 64 response headers in all, so that the APIRule fits in one stored object"
// +kubebuilder:validation:XValidation:rule="self.rules.map(r, has(r.request) && has(r.request.removeHeaders) ? size(r.request.removeHeaders) : 0).sum() <= 32",message="the rules of an APIRule remove at most 32 request headers in all, so that the APIRule fits in one stored object"
// +kubebuilder:validation:XValidation:rule="self.rules.map(r, has(r.clientAddresses) ? (has(r.clientAddresses.allow) ? size(r.clientAddresses.allow) : 0) + (has(r.clientAddresses.deny) ? size(r.clientAddresses.deny) : 0) : 0).sum() <= 64",message="the rules of an APIRule list at most 64 client address blocks in all, so that the APIRule fits in one stored object"
type APIRuleSpec struct {
	// hosts the API is served on. A host has one owner cluster-wide: the
	// oldest APIRule that claims it, exactly or through a wildcard
	// ("*.example.com" covers every name ending in .example.com); a later
	// claim is refused (reason HostOccupied) until the owner lets go. A
	// wildcard host needs the cluster administrator's grant (APIGateway
	// spec.apiRules.wildcardHosts). hosts cannot be changed, since a claim
	// dates from the APIRule's creation: create a new APIRule instead.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="hosts cannot be changed: a claim on a host dates from the APIRule's creation; create a new APIRule for other hosts"
	Hosts []Hostname `json:"hosts"`

	// gateway is the Istio Gateway, as <namespace>/<name>, that serves the
	// hosts. Empty means the default gateway of the APIGateway
	// (spec.gateway), <spec.gateway.namespace>/portico-gateway, which serves
	// *.<spec.gateway.domain>: every host must then be a name directly
	// under that domain (api.example.com for the domain example.com; not
	// the domain itself, a name two labels below it, or a wildcard), else
	// the APIRule is refused (reason HostNotOnGateway). Without an enabled
	// default gateway an APIRule naming no gateway is refused (reason
	// NoDefaultGateway). Either refusal removes the APIRule's Istio objects.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="gateway must be <namespace>/<name> of an Istio Gateway"
	Gateway string `json:"gateway,omitempty"`

	// parentRef names a Gateway API Gateway (gateway.networking.k8s.io)
	// that serves the hosts instead of an Istio Gateway: HTTPRoute mode.
	// The controller then writes one HTTPRoute named like the APIRule
	// instead of the VirtualService, with the same access policies on the
	// backends, and the APIRule is Ready only once every parent of the route
	// reports it Accepted with its references resolved. A backend Service in
	// another namespace needs a ReferenceGrant of that namespace (from
	// HTTPRoutes of the APIRule's namespace to the Service). At most 16
	// rules. Exclusive with gateway.
	// +optional
	ParentRef *ParentReference `json:"parentRef,omitempty"`

	// service receives the requests of every rule that names no service
	// and no backends.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`

	// timeout of requests; Istio's default when empty. A duration from 1ms
	// to 1h in whole milliseconds, such as 500ms, 15s or 1m30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self != '' && self.matches('^([0-9]+([.][0-9]{1,5})?h)?([0-9]+([.][0-9]{1,4})?m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?$') && duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="timeout must be a duration from 1ms to 1h in whole milliseconds, such as 500ms, 15s or 1m30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// cors policy of the hosts.
	// +optional
	CORS *CORSPolicy `json:"cors,omitempty"`

	// rules are the exposed paths. Two rules may not share a path and a
	// method (a rule without methods has them all) unless their matches
	// differ, and then they need the same authentication. A prefix rule ("/api/*")
	// that covers another rule's path ("/api/admin") with a method in common
	// and serves the same workload must have the same authentication (both
	// noAuth, or jwt with the same issuer, audiences and scopes, or the same
	// authentications and authorizations in any order): Istio adds up the
	// access rules of a workload, so the covering rule would open the
	// covered path. The API server checks single-issuer rules naming the
	// same service; the controller checks the rest, including every pair
	// where a rule lists jwt.authentications, has extAuth or lists backends
	// (reason InvalidRule; a rule with backends serves every one of them), since
	// comparing those lists for every pair of rules would exceed the API
	// server's validation budget.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.filter(b, b.path == a.path && !has(b.match) && (!has(a.methods) || !has(b.methods) || a.methods.exists(m, m in b.methods))).size() <= 1)",message="two rules have the same path and a method in common, and neither has a match; rules on one path and method need different matches (headers, queryParams)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.match) || self.all(b, b.path != a.path || has(a.jwt) == has(b.jwt) || has(a.backends) || has(b.backends) || (has(a.methods) && has(b.methods) && !a.methods.exists(m, m in b.methods)) || has(a.service) != has(b.service) || (has(a.service) && a.service != b.service)))",message="a rule with match shares its path and a method with a rule of the same service but other authentication (noAuth against jwt); a match selects a route, not access: the backend's access policy cannot see it, so both rules need the same authentication"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.path.endsWith('/*') || self.all(b, b.path == a.path || !b.path.startsWith(a.path.substring(0, a.path.size() - 1)) || (has(a.methods) && has(b.methods) && !a.methods.exists(m, m in b.methods)) || has(a.backends) || has(b.backends) || has(a.service) != has(b.service) || (has(a.service) && a.service != b.service) || (!has(a.jwt) && !has(b.jwt)) || (has(a.jwt) && has(b.jwt) && (has(a.jwt.authentications) || has(b.jwt.authentications))) || (has(a.jwt) && has(b.jwt) && a.jwt.issuer == b.jwt.issuer && has(a.jwt.audiences) == has(b.jwt.audiences) && (!has(a.jwt.audiences) || sets.equivalent(a.jwt.audiences, b.jwt.audiences)) && has(a.jwt.requiredScopes) == has(b.jwt.requiredScopes) && (!has(a.jwt.requiredScopes) || sets.equivalent(a.jwt.requiredScopes, b.jwt.requiredScopes)))))",message="a prefix rule covers another rule's path with a method in common and the same service but different authentication; Istio adds up access rules, so the covered path would be open to the prefix rule's callers: give both the same noAuth or jwt, or make the paths disjoint"
	Rules []Rule `json:"rules"`
}

// APIRuleStatus is the observed state of an APIRule.
type APIRuleStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions of the APIRule; Ready carries one of the documented reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// APIRule exposes a Service through an Istio Gateway with per-path access
// rules. The apirule controller turns it into one VirtualService and, for
// every backend Service of the APIRule's namespace, one AuthorizationPolicy
// and, when a rule routed there uses JWT, one RequestAuthentication (a
// consenting Service of another namespace gets routes only). The objects
// for spec.service are named like the APIRule, the others
// <apirule>-<service>; names beyond 63 characters are shortened with a
// hash. Backends must be ordinary Services whose selector picks pods of
// their own namespace (reason BackendNotPermitted otherwise), each host has
// one owner (HostOccupied), and rules may not open what another APIRule's
// live policy guards on the same pods (AccessConflict).
// The controller never changes or deletes an object it did not create: a
// same-named object of someone else's is reported (reason Conflict).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=portico
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="an APIRule name has at most 63 characters: its Istio objects carry it in a label"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Hosts",type=string,JSONPath=`.spec.hosts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type APIRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired exposure.
	// +required
	Spec APIRuleSpec `json:"spec"`

	// status is written by the apirule controller.
	// +optional
	Status APIRuleStatus `json:"status,omitempty"`
}

// APIRuleList is a list of APIRules.
//
// +kubebuilder:object:root=true
type APIRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIRule `json:"items"`
}
