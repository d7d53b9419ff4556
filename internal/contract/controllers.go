package contract

import (
	"slices"
	"strings"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// OperatorName is the operator's binary, image and Deployment name.
const OperatorName = "portico-operator"

// Controller is one gateway controller as both sides of the contract see it.
type Controller struct {
	// Name is the controller's name in the APIGateway spec; its package is
	// controllers/<name>.
	Name operatorv1alpha1.ControllerName
	// Required CRDs must all be usable (Established, serving the version)
	// for the operator to run the controller and for the controller to run
	// its workers.
	Required []CRD
	// Optional CRDs are used when usable; their coming and going restarts
	// the controller's workers so their watches match the cluster. The
	// operator may require one of them for some specs (its catalog says
	// which).
	Optional []CRD
	// Flags are the names (without "--") of every flag the controller's
	// binary declares; a test compares them with each binary's flag set.
	// The operator accepts spec.controllers[].extraArgs only among them,
	// less Reserved().
	Flags []string
	// OwnReserved are flags of this binary alone (beyond the command every
	// controller shares) that the operator sets itself, so extraArgs may
	// not: the global rate limits' flags.
	OwnReserved []string
	// BinaryName, when set, replaces <name>-controller as the binary,
	// image, Deployment and ServiceAccount name (a component that is not a
	// controller, such as the rate-limit service).
	BinaryName string
	// ServesWithoutLeaderElection marks a component whose every replica
	// serves (the rate-limit service answers the gateways from each pod):
	// it accepts --leader-elect but does not gate its work on the Lease.
	ServesWithoutLeaderElection bool
	// ProbePort, when set, replaces HealthPort as the port of HealthzPath
	// and ReadyzPath: the rate-limit service's HealthPort is its gRPC port
	// (globallimit.GRPCPort).
	ProbePort int32
}

// HealthPortOf is the port the component serves its probes on.
func (c Controller) HealthPortOf() int32 {
	if c.ProbePort != 0 {
		return c.ProbePort
	}
	return HealthPort
}

// Binary is the controller's binary, image, Deployment and ServiceAccount
// name: BinaryName, else <name>-controller.
func (c Controller) Binary() string {
	if c.BinaryName != "" {
		return c.BinaryName
	}
	return string(c.Name) + "-controller"
}

// RelatedImageEnv is the operator environment variable (OLM's
// RELATED_IMAGE_* convention) that overrides the controller's image:
// RELATED_IMAGE_<NAME>_CONTROLLER (RELATED_IMAGE_<BINARY> for a
// BinaryName: RELATED_IMAGE_PORTICO_RATELIMIT_SERVICE).
func (c Controller) RelatedImageEnv() string {
	return "RELATED_IMAGE_" + strings.ToUpper(strings.ReplaceAll(c.Binary(), "-", "_"))
}

// LeaderElectionID is the name of the controller's leader Lease. It must
// not change between releases: during a rolling upgrade the old and the new
// pod must contend for the same Lease.
func (c Controller) LeaderElectionID() string {
	return c.Binary() + "." + gatewayv1alpha1.GroupVersion.Group
}

// The controllers.
var (
	// APIRule turns APIRules into VirtualServices, AuthorizationPolicies and
	// RequestAuthentications. Optional: Istio Gateways (an APIRule naming a
	// missing one is reported), ServiceEntries and WorkloadEntries (backends
	// they would divert are refused), the APIGateway (wildcard host grants
	// and the default gateway), and the Gateway API's HTTPRoutes and
	// ReferenceGrants (HTTPRoute mode, for APIRules naming a Gateway API
	// Gateway) and Gateways (one that is missing is reported).
	APIRule = Controller{
		Name:     operatorv1alpha1.ControllerAPIRule,
		Required: []CRD{APIRules, VirtualServices, AuthorizationPolicies, RequestAuthentications},
		Optional: []CRD{IstioGateways, ServiceEntries, WorkloadEntries, APIGateways, HTTPRoutes, ReferenceGrants, GatewayAPIGateways},
		Flags:    runnerFlags,
	}
	// RateLimit computes one EnvoyFilter per gateway workload from the
	// RateLimits. Optional: the kinds a RateLimit may target. While the
	// rate-limit service runs, the operator passes it the global limits'
	// flags (FlagGlobalRateLimit and the others).
	RateLimit = Controller{
		Name:        operatorv1alpha1.ControllerRateLimit,
		Required:    []CRD{RateLimits, EnvoyFilters},
		Optional:    []CRD{IstioGateways, GatewayAPIGateways, APIRules},
		Flags:       append(slices.Clone(runnerFlags), FlagGlobalRateLimit, FlagGlobalRateLimitFailOpen, FlagGlobalRateLimitTimeout),
		OwnReserved: []string{FlagGlobalRateLimit, FlagGlobalRateLimitFailOpen, FlagGlobalRateLimitTimeout},
	}
	// RateLimitService is Portico's rate-limit service: the gRPC
	// RateLimitService v3 that the gateways' global rate limit filters
	// (in the EnvoyFilters the ratelimit controller writes) call, backed
	// by Redis. Its binary, Deployment and Service are
	// globallimit.ServiceName; every replica serves.
	RateLimitService = Controller{
		Name:     operatorv1alpha1.ControllerRateLimitService,
		Required: []CRD{EnvoyFilters},
		// The runner's flags but --pprof-bind-address (it serves no profiles).
		Flags: append(slices.DeleteFunc(slices.Clone(runnerFlags), func(f string) bool { return f == FlagPprofAddress }),
			FlagGRPCAddress, FlagRedisConfigDir, FlagRedisTLS, FlagMaxKeysPerRule),
		OwnReserved:                 []string{FlagGRPCAddress, FlagRedisConfigDir, FlagRedisTLS, FlagMaxKeysPerRule},
		BinaryName:                  "portico-ratelimit-service",
		ServesWithoutLeaderElection: true,
		ProbePort:                   RateLimitServiceHealthPort,
	}
	// Gateway runs the default gateway of spec.gateway. Optional:
	// cert-manager's Certificate (the certManager source), APIRules (which
	// keep a disabled gateway until none uses it), and the Gateway API's
	// Gateways and HTTPRoutes (spec.gateway.gatewayAPI: the default gateway
	// as a Gateway API Gateway with its redirect route).
	Gateway = Controller{
		Name:     operatorv1alpha1.ControllerGateway,
		Required: []CRD{APIGateways, IstioGateways, VirtualServices},
		Optional: []CRD{Certificates, APIRules, GatewayAPIGateways, HTTPRoutes},
		Flags:    runnerFlags,
	}
)

// runnerFlags are the flags every controller binary takes: they all run
// through the same command (package controllers/internal/runner).
var runnerFlags = []string{
	"version", FlagMetricsAddress, FlagHealthAddress, FlagLeaderElect, FlagLeaderElectionNS,
	FlagLogLevel, FlagNamespace, FlagPprofAddress, FlagGracefulShutdownTimeout,
	FlagKubeAPIQPS, FlagKubeAPIBurst, FlagKubeAPITimeout, FlagKubeconfig,
}

// ReservedFlags may not be passed to a controller through extraArgs: the
// operator sets them itself (the bind addresses its probes and ports
// depend on, leader election, the log level of spec.logLevel), or they
// would take the controller away from what the operator runs (the leader
// Lease's namespace, another cluster's kubeconfig, --version which exits).
var ReservedFlags = []string{
	FlagMetricsAddress, FlagHealthAddress, FlagLeaderElect, FlagLeaderElectionNS, FlagLogLevel,
	FlagKubeconfig, "version",
}

// Reserved are the flags of the controller that extraArgs may not set:
// ReservedFlags and its OwnReserved.
func (c Controller) Reserved() []string {
	return append(slices.Clone(ReservedFlags), c.OwnReserved...)
}

// Flags of the global rate limits, which the operator sets from
// spec.rateLimits.global (each in its binary's OwnReserved).
const (
	// FlagGlobalRateLimit (ratelimit controller, bool) writes the global
	// rate limit filters and the rate-limit service's feed; the operator
	// passes true while the rate-limit service runs.
	FlagGlobalRateLimit = "global-ratelimit"
	// FlagGlobalRateLimitFailOpen (ratelimit controller, bool) lets the
	// gateways serve when the service cannot answer.
	FlagGlobalRateLimitFailOpen = "global-ratelimit-fail-open"
	// FlagGlobalRateLimitTimeout (ratelimit controller, duration) is how
	// long a gateway waits for the service's decision.
	FlagGlobalRateLimitTimeout = "global-ratelimit-timeout"

	// FlagGRPCAddress (rate-limit service) serves RateLimitService v3
	// (":8081", globallimit.GRPCPort).
	FlagGRPCAddress = "grpc-bind-address"
	// FlagRedisConfigDir (rate-limit service) is the directory of the
	// administrator's Redis Secret's keys (address, username, password,
	// ca.crt), re-read when they change.
	FlagRedisConfigDir = "redis-config-dir"
	// FlagRedisTLS (rate-limit service, bool) connects to Redis over TLS.
	FlagRedisTLS = "redis-tls"
	// FlagMaxKeysPerRule (rate-limit service) bounds the distinct client
	// budgets per rule and window.
	FlagMaxKeysPerRule = "max-keys-per-rule"
)

// RateLimitServiceHealthPort serves the rate-limit service's probes: its
// gRPC port is HealthPort's number (globallimit.GRPCPort, 8081), so its
// probes move to the next port.
const RateLimitServiceHealthPort = 8082

// RedisConfigDir is where the operator mounts the Redis Secret in the
// rate-limit service's pods.
const RedisConfigDir = "/etc/portico/redis"

// The keys of the administrator's Redis Secret (spec.rateLimits.global.redis.secretName).
const (
	RedisAddressKey  = "address"
	RedisUsernameKey = "username"
	RedisPasswordKey = "password"
	RedisCAKey       = "ca.crt"
)

// Controllers lists every controller, in the operator's catalog order.
var Controllers = []Controller{APIRule, RateLimit, Gateway, RateLimitService}

// ControllerNamed returns the controller with the given name.
func ControllerNamed(name operatorv1alpha1.ControllerName) (Controller, bool) {
	for _, c := range Controllers {
		if c.Name == name {
			return c, true
		}
	}
	return Controller{}, false
}
