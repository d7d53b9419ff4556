package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SingletonName is the only accepted name of an APIGateway: the module is
// configured once per cluster.
const SingletonName = "default"

// ControllerName names a controller of Portico's catalog.
// +kubebuilder:validation:Enum=apirule;ratelimit;gateway;ratelimitservice
type ControllerName string

// The controllers of the catalog.
const (
	// ControllerAPIRule exposes Services through Istio with per-path access rules.
	ControllerAPIRule ControllerName = "apirule"
	// ControllerRateLimit applies local token-bucket rate limits to Istio gateways.
	ControllerRateLimit ControllerName = "ratelimit"
	// ControllerGateway runs the default gateway (spec.gateway): an Istio
	// Gateway with its TLS certificate.
	ControllerGateway ControllerName = "gateway"
	// ControllerRateLimitService is Portico's rate-limit service
	// (portico-ratelimit-service), which the gateways' global rate limit
	// filters call; it runs only while spec.rateLimits.global is set.
	ControllerRateLimitService ControllerName = "ratelimitservice"
)

// LogLevel is the verbosity of a controller's logs.
// +kubebuilder:validation:Enum=debug;info;error
type LogLevel string

// The accepted log levels.
const (
	LogLevelDebug LogLevel = "debug"
	LogLevelInfo  LogLevel = "info"
	LogLevelError LogLevel = "error"
)

// APIGatewaySpec is the desired configuration of Portico's gateway controllers.
type APIGatewaySpec struct {
	// controllers configures the controllers of the catalog, one entry per
	// controller name. A controller that is not listed runs with its defaults
	// (enabled, one replica, the operator's default image).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Controllers []ControllerSpec `json:"controllers,omitempty"`

	// apiRules holds what the cluster administrator grants to tenants'
	// APIRules.
	// +optional
	APIRules *APIRulesSpec `json:"apiRules,omitempty"`

	// gateway configures the default gateway: an Istio Gateway for
	// *.<domain> with its TLS certificate, which APIRules that name no
	// gateway use. Not set means no default gateway.
	// +optional
	Gateway *GatewaySpec `json:"gateway,omitempty"`

	// networkPolicies confines each controller's network traffic with a
	// NetworkPolicy the operator writes beside its Deployment: its pods may
	// connect only to the API server (the addresses of Service
	// default/kubernetes's endpoints and its ClusterIP) and to DNS (port 53),
	// and accept connections only on the metrics port, from pods of the
	// namespaces named in metricsFromNamespaces (the kubelet's probes come
	// from the node, which enforcing network plugins allow). A cluster
	// without a network plugin that enforces NetworkPolicies stores them and
	// enforces nothing. Not set: on, and no namespace may reach the metrics.
	// +optional
	NetworkPolicies *NetworkPoliciesSpec `json:"networkPolicies,omitempty"`

	// rateLimits configures what RateLimits rely on beyond the gateways
	// themselves: today, the service that enforces their global limits.
	// +optional
	RateLimits *RateLimitsSpec `json:"rateLimits,omitempty"`
}

// RateLimitsSpec configures the rate limiting of RateLimits.
type RateLimitsSpec struct {
	// global runs Portico's rate-limit service (Deployment and Service
	// portico-ratelimit-service in Portico's namespace), which counts the
	// requests of RateLimits' spec.global rules in Redis, so a budget is
	// shared by every gateway replica. The gateways call it over gRPC
	// before each request their global rules match. Not set: the service
	// does not run and spec.global rules are not enforced (local limits
	// still are).
	// +optional
	Global *GlobalRateLimitsSpec `json:"global,omitempty"`
}

// GlobalRateLimitsSpec configures the rate-limit service of global limits.
type GlobalRateLimitsSpec struct {
	// redis is where the service keeps its counters.
	// +required
	Redis RedisSpec `json:"redis"`

	// failOpen lets the gateways serve requests when the service or Redis
	// cannot answer within timeout: true (the default) lets them through
	// unlimited; false refuses them (HTTP 500) until the service answers
	// again. Choose false only where an unlimited request costs more than
	// a refused one.
	// +optional
	// +kubebuilder:default=true
	FailOpen *bool `json:"failOpen,omitempty"`

	// maxKeysPerRule bounds how many distinct clients (client key values)
	// get their own budget per rule and time window; clients beyond it
	// share one overflow budget, so a flood of new keys cannot exhaust
	// Redis's memory. Default 10000, from 1 to 1000000.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxKeysPerRule *int32 `json:"maxKeysPerRule,omitempty"`

	// timeout is how long a gateway waits for the service's decision
	// before failing open or closed (failOpen), from 10ms to 5s. Default
	// 100ms.
	// +optional
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:XValidation:rule="self != '' && self.matches('^([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?$') && duration(self) >= duration('10ms') && duration(self) <= duration('5s')",message="timeout must be a duration from 10ms to 5s in whole milliseconds, such as 100ms, 250ms or 1.5s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RedisSpec says how the rate-limit service reaches Redis.
type RedisSpec struct {
	// secretName is a Secret in Portico's namespace (the operator's,
	// portico-system by default) holding the connection: key address
	// (host:port, required), and optional keys username, password and
	// ca.crt (a PEM root CA for tls). The service runs only while the
	// Secret exists with an address; it is mounted into its pods as a
	// volume, so a changed password reaches them without a restart.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SecretName string `json:"secretName"`

	// tls connects to Redis over TLS, verifying its certificate against
	// the Secret's ca.crt when present, else the system's roots. Default
	// false.
	// +optional
	// +kubebuilder:default=false
	TLS bool `json:"tls,omitempty"`
}

// Default settings of spec.rateLimits.global.
const (
	DefaultGlobalRateLimitFailOpen       = true
	DefaultGlobalRateLimitMaxKeysPerRule = int32(10000)
	DefaultGlobalRateLimitTimeout        = 100 * time.Millisecond
)

// GlobalRateLimits is spec.rateLimits.global, or nil when it is not set.
func (s *APIGatewaySpec) GlobalRateLimits() *GlobalRateLimitsSpec {
	if s == nil || s.RateLimits == nil {
		return nil
	}
	return s.RateLimits.Global
}

// FailsOpen reports whether the gateways serve when the service cannot
// answer: failOpen, default true.
func (g *GlobalRateLimitsSpec) FailsOpen() bool {
	if g == nil || g.FailOpen == nil {
		return DefaultGlobalRateLimitFailOpen
	}
	return *g.FailOpen
}

// KeysPerRule is maxKeysPerRule, default 10000.
func (g *GlobalRateLimitsSpec) KeysPerRule() int32 {
	if g == nil || g.MaxKeysPerRule == nil {
		return DefaultGlobalRateLimitMaxKeysPerRule
	}
	return *g.MaxKeysPerRule
}

// DecisionTimeout is timeout, default 100ms.
func (g *GlobalRateLimitsSpec) DecisionTimeout() time.Duration {
	if g == nil || g.Timeout == nil || g.Timeout.Duration <= 0 {
		return DefaultGlobalRateLimitTimeout
	}
	return g.Timeout.Duration
}

// NetworkPoliciesSpec configures the controllers' NetworkPolicies.
type NetworkPoliciesSpec struct {
	// enabled makes the operator write a NetworkPolicy for each running
	// controller; false removes them. Default true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// metricsFromNamespaces names the namespaces whose pods may connect to
	// the controllers' metrics port (a Prometheus's namespace). Empty: none
	// may.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	MetricsFromNamespaces []string `json:"metricsFromNamespaces,omitempty"`
}

// NetworkPoliciesEnabled reports whether the operator writes the
// controllers' NetworkPolicies: unless spec.networkPolicies.enabled is false.
func (s *APIGatewaySpec) NetworkPoliciesEnabled() bool {
	return s.NetworkPolicies == nil || s.NetworkPolicies.Enabled == nil || *s.NetworkPolicies.Enabled
}

// MetricsFromNamespaces is the namespaces that may reach the controllers'
// metrics port.
func (s *APIGatewaySpec) MetricsFromNamespaces() []string {
	if s.NetworkPolicies == nil {
		return nil
	}
	return s.NetworkPolicies.MetricsFromNamespaces
}

// APIRulesSpec holds the cluster administrator's grants to APIRules.
type APIRulesSpec struct {
	// wildcardHosts grants wildcard hosts to namespaces. An APIRule may
	// claim a wildcard host ("*.example.com", which covers every name ending
	// in .example.com) only when an entry with that exact host lists its
	// namespace; tenants cannot grant it to themselves.
	// +optional
	// +listType=map
	// +listMapKey=host
	// +kubebuilder:validation:MaxItems=64
	WildcardHosts []WildcardHostGrant `json:"wildcardHosts,omitempty"`

	// ownedHosts gives host names to namespaces. The names an entry covers
	// (its host and, for a wildcard such as *.shop.example.com, every name
	// under it) may be claimed only by APIRules of the namespaces it lists:
	// an APIRule of another namespace whose hosts reach one of them
	// (exactly, or through a wildcard) is refused with HostNotPermitted and
	// holds nothing, however old it is. Among the listed namespaces' APIRules
	// the oldest claim owns a name, as for any host. A wildcard entry also
	// lets its namespaces claim the wildcard itself. Give a team the names it
	// must never lose: it can then delete and re-create its APIRules (the way
	// to change their hosts) without anyone else taking a name meanwhile.
	// +optional
	// +listType=map
	// +listMapKey=host
	// +kubebuilder:validation:MaxItems=256
	OwnedHosts []HostOwnership `json:"ownedHosts,omitempty"`

	// extAuthProviders grants external authorizers to namespaces. An
	// APIRule rule's extAuth may name an authorizer only when an entry
	// with that name lists the APIRule's namespace (or "*"); other
	// APIRules naming it are refused with AuthorizerNotPermitted and their
	// Istio objects removed. The name is that of an Istio mesh extension
	// provider (meshConfig extensionProviders), which the administrator
	// configures in Istio: an authorizer sees the requests it decides on,
	// their headers included, so grant it only to the teams that trust it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ExtAuthProviders []ExtAuthProviderGrant `json:"extAuthProviders,omitempty"`

	// trustedProxies is how many proxies (load balancers, CDNs) in front
	// of every gateway APIRules use append to X-Forwarded-For, from 0 to
	// 8: the gateway takes the client's address that many entries from the
	// right of the header. Set the same count on Istio's gateway
	// (meshConfig.defaultConfig.gatewayTopology.numTrustedProxies, or the
	// proxy.istio.io/config annotation of its pods), which Portico does not
	// write (docs/operations.md). Rules with clientAddresses are refused
	// (InvalidRule) until it is set: an address read with another count
	// than the gateway's would allow other clients.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	TrustedProxies *int32 `json:"trustedProxies,omitempty"`
}

// ExtAuthProviderGrant lets the APIRules of some namespaces use one
// external authorizer.
type ExtAuthProviderGrant struct {
	// name of the Istio mesh extension provider, as in meshConfig
	// extensionProviders and an APIRule's extAuth.authorizers: a DNS label
	// (lower-case letters, digits, '-'), since Istio refuses a provider of
	// any other name and denies every request its CUSTOM policies match.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// namespaces whose APIRules may use the authorizer; "*" grants it to
	// every namespace.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Namespaces []string `json:"namespaces"`
}

// GrantsAuthorizer reports whether the external authorizer (an Istio mesh
// extension provider) is granted to namespace ns.
func (s *APIRulesSpec) GrantsAuthorizer(name, ns string) bool {
	if s == nil {
		return false
	}
	for _, g := range s.ExtAuthProviders {
		if g.Name != name {
			continue
		}
		for _, n := range g.Namespaces {
			if n == "*" || n == ns {
				return true
			}
		}
	}
	return false
}

// HostOwnership gives the names of one host to some namespaces.
type HostOwnership struct {
	// host is a name (api.example.com) or a wildcard (*.example.com, which
	// covers every name ending in .example.com).
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	Host string `json:"host"`

	// namespaces whose APIRules may claim the names; "*" is every namespace.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Namespaces []string `json:"namespaces"`
}

// WildcardHostGrant lets the APIRules of some namespaces claim one wildcard host.
type WildcardHostGrant struct {
	// host is the wildcard host, such as *.example.com.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	Host string `json:"host"`

	// namespaces whose APIRules may claim the host; "*" grants it to every
	// namespace.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	Namespaces []string `json:"namespaces"`
}

// Grants reports whether the wildcard host is granted to namespace ns.
func (s *APIRulesSpec) Grants(host, ns string) bool {
	if s == nil {
		return false
	}
	for _, g := range s.WildcardHosts {
		if g.Host != host {
			continue
		}
		for _, n := range g.Namespaces {
			if n == "*" || n == ns {
				return true
			}
		}
	}
	return false
}

// ControllerSpec configures one controller of the catalog.
type ControllerSpec struct {
	// name of the controller in the catalog.
	// +required
	Name ControllerName `json:"name"`

	// enabled runs the controller when its required CRDs are installed.
	// Set it to false to remove the controller's Deployment.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// image is a full image reference (registry/repository:tag or @digest)
	// that replaces the default controller image, for example an air-gapped
	// mirror. Empty means the operator's default.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || !self.contains(' ')",message="image must not contain spaces"
	Image string `json:"image,omitempty"`

	// replicas of the controller's Deployment. 0 keeps the controller
	// installed but scaled down.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Replicas *int32 `json:"replicas,omitempty"`

	// logLevel of the controller: debug, info or error.
	// +optional
	// +kubebuilder:default=info
	LogLevel LogLevel `json:"logLevel,omitempty"`

	// resources of the controller container. Empty means the catalog's
	// defaults.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains the controller's pods to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the controller's pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the controller's pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// priorityClassName of the controller's pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// env adds environment variables to the controller container, for
	// example HTTPS_PROXY. POD_NAMESPACE and PORTICO_MEMORY_LIMIT are
	// reserved: the operator sets them from the pod's namespace and the
	// container's memory limit and ignores entries of those names. The
	// controller sets Go's soft memory limit to 90% of the container's
	// memory limit unless GOMEMLIMIT is set here.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Env []corev1.EnvVar `json:"env,omitempty"`

	// podAnnotations are added to the controller's pod template.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// podDisruptionBudget bounds how many of the controller's pods a
	// voluntary disruption (a node drain, an eviction) may take down at
	// once. The operator keeps a PodDisruptionBudget named
	// <name>-controller only while the controller runs more than one
	// replica, and removes it otherwise, so a single replica never blocks
	// a drain. Not set, with more than one replica, means maxUnavailable 1.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// topologySpreadConstraints of the controller's pods. Not set, with more
	// than one replica, spreads them across nodes (topologyKey
	// kubernetes.io/hostname, maxSkew 1, whenUnsatisfiable ScheduleAnyway);
	// an empty list spreads nothing. A constraint without a labelSelector
	// selects the controller's pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// imagePullSecrets name Secrets in the operator's namespace
	// (portico-system) holding the credentials to pull the controller's
	// image, for example from a private mirror.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// extraArgs are appended to the controller's command line, one flag per
	// entry in the form --name=value (booleans too: --name=true), for
	// example --kube-api-qps=100. Only the flags the controller declares
	// are accepted, except those the operator sets itself (--log-level,
	// --leader-elect, the bind addresses, --leader-election-namespace,
	// --version); any other refuses the controller with reason
	// InvalidSpec and leaves its Deployment as it was.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(a, a.matches('^--[a-z0-9][-a-z0-9]*='))",message="each extraArgs entry must be one flag in the form --name=value"
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// PodDisruptionBudgetSpec sets one of minAvailable and maxUnavailable of a
// controller's PodDisruptionBudget.
// +kubebuilder:validation:XValidation:rule="has(self.minAvailable) != has(self.maxUnavailable)",message="set exactly one of minAvailable and maxUnavailable"
type PodDisruptionBudgetSpec struct {
	// minAvailable is how many of the controller's pods, or which
	// percentage ("50%"), must stay available during a voluntary
	// disruption. A negative number refuses the controller (InvalidSpec).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%$`
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// maxUnavailable is how many of the controller's pods, or which
	// percentage ("50%"), a voluntary disruption may take down at once. A
	// negative number refuses the controller (InvalidSpec).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%$`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// State summarises an APIGateway in one word.
// +kubebuilder:validation:Enum=Ready;Processing;Warning;Error;Deleting
type State string

// The APIGateway states, from the most to the least severe as the operator
// aggregates them.
const (
	// StateError means a controller is Degraded or a Deployment could not be applied.
	StateError State = "Error"
	// StateProcessing means a controller is rolling out.
	StateProcessing State = "Processing"
	// StateWarning means an enabled controller is Blocked by missing CRDs.
	StateWarning State = "Warning"
	// StateReady means every enabled controller is Ready.
	StateReady State = "Ready"
	// StateDeleting means the APIGateway is being deleted.
	StateDeleting State = "Deleting"
)

// ControllerPhase is where one controller stands.
// +kubebuilder:validation:Enum=Disabled;Blocked;Progressing;Ready;Degraded
type ControllerPhase string

// The controller phases.
const (
	// PhaseDisabled means the controller is disabled in the spec; it has no Deployment.
	PhaseDisabled ControllerPhase = "Disabled"
	// PhaseBlocked means a precondition (a required CRD, a dependency) is not
	// met; the controller has no Deployment.
	PhaseBlocked ControllerPhase = "Blocked"
	// PhaseProgressing means the Deployment is applied and rolling out.
	PhaseProgressing ControllerPhase = "Progressing"
	// PhaseReady means the rollout is complete.
	PhaseReady ControllerPhase = "Ready"
	// PhaseDegraded means the rollout failed or pods are failing.
	PhaseDegraded ControllerPhase = "Degraded"
)

// ControllerStatus is the observed state of one controller.
type ControllerStatus struct {
	// name of the controller in the catalog.
	// +required
	Name ControllerName `json:"name"`

	// phase of the controller: Disabled, Blocked, Progressing, Ready or Degraded.
	// +required
	Phase ControllerPhase `json:"phase"`

	// reason is a CamelCase word explaining the phase; the values are
	// documented constants of this API.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`

	// message explains the phase to a human: the missing CRD, the failing pod
	// and container, the rollout progress.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// missingCRDs lists the required CRDs, as name/version, that are absent,
	// not Established or not serving that version.
	// +optional
	// +listType=atomic
	MissingCRDs []string `json:"missingCRDs,omitempty"`

	// image the controller's Deployment runs, when it has one.
	// +optional
	Image string `json:"image,omitempty"`

	// imageID is the image digest the controller's ready pods run, as the
	// container runtime reports it (the pods' containerStatuses[].imageID
	// of the controller container), such as
	// ghcr.io/portico-dev/apirule-controller@sha256:<hex>. Only pods of the
	// Deployment's current pod template count (those of the ReplicaSet
	// whose template is the Deployment's): it is empty until such a pod is
	// ready, and while the controller has no Deployment. Should ready pods
	// of the current template report different digests (a mutable tag
	// resolved at different times on different nodes; digest-pinned images
	// cannot disagree), it is the digest most of them run, and of digests
	// tied, the lexicographically first.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ImageID string `json:"imageID,omitempty"`

	// replicas wanted for the controller's Deployment.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas of the controller's Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// updatedReplicas of the controller's Deployment: pods of the newest template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// lastTransitionTime is when phase last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// APIGatewayStatus is the observed state of Portico's gateway controllers.
type APIGatewayStatus struct {
	// state summarises the gateway: Error if any controller is Degraded or an
	// apply failed, else Processing if any is rolling out, else Warning if an
	// enabled controller is Blocked, else Ready. Deleting while the
	// APIGateway is being deleted.
	// +optional
	State State `json:"state,omitempty"`

	// ready counts ready controllers over enabled controllers, as "1/2".
	// +optional
	Ready string `json:"ready,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions of the APIGateway. The Ready condition carries one of the
	// documented Reason* constants.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// controllers reports every controller of the catalog, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Controllers []ControllerStatus `json:"controllers,omitempty"`

	// gateway is the state of the default gateway, written by the gateway
	// controller.
	// +optional
	Gateway *GatewayStatus `json:"gateway,omitempty"`
}

// APIGateway configures Portico, the API-gateway module, for the whole
// cluster: which gateway controllers run and how. Only one APIGateway,
// named "default", is accepted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=apigw,categories=portico
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="Overall state"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`,description="Ready controllers / enabled controllers"
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.status.gateway.state`,description="State of the default gateway"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="only one APIGateway is allowed per cluster and it must be named 'default'"
type APIGateway struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired configuration.
	// +optional
	Spec APIGatewaySpec `json:"spec,omitempty"`

	// status is the observed state, written by the operator.
	// +optional
	Status APIGatewayStatus `json:"status,omitempty"`
}

// APIGatewayList is a list of APIGateways.
//
// +kubebuilder:object:root=true
type APIGatewayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIGateway `json:"items"`
}

// Labels the operator puts on every object it manages, and its field manager.
const (
	// LabelController names the catalog controller an object belongs to.
	LabelController = "operator.portico.dev/controller"
	// ManagedBy is the value of app.kubernetes.io/managed-by on managed objects.
	ManagedBy = "portico-operator"
	// PartOf is the value of app.kubernetes.io/part-of on managed objects.
	PartOf = "portico"
	// FieldManager is the operator's server-side apply field manager.
	FieldManager = "portico-operator"
)
