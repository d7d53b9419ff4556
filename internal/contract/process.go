package contract

import "time"

// The controller container: what the operator's Deployment passes and
// probes, and what the controller binary parses and serves. The operator's
// own binary takes the same address flags.
const (
	// ContainerName is the controller container's name in its pod.
	ContainerName = "manager"

	// MetricsPort serves Prometheus metrics at /metrics.
	MetricsPort = 8080
	// HealthPort serves HealthzPath and ReadyzPath.
	HealthPort = 8081
	// HealthzPath is the liveness endpoint.
	HealthzPath = "/healthz"
	// ReadyzPath is the readiness endpoint: ready while every required CRD
	// is usable and the workers run.
	ReadyzPath = "/readyz"

	// Flag names (without the leading "--").
	FlagMetricsAddress   = "metrics-bind-address"
	FlagHealthAddress    = "health-probe-bind-address"
	FlagLeaderElect      = "leader-elect"
	FlagLeaderElectionNS = "leader-election-namespace"
	FlagLogLevel         = "log-level"
	FlagNamespace        = "namespace"
	// FlagPprofAddress serves Go's /debug/pprof profiles; off unless set
	// (the operator never sets it: it is for benchmarks and debugging).
	FlagPprofAddress = "pprof-bind-address"
	// FlagKubeAPIQPS, FlagKubeAPIBurst and FlagKubeAPITimeout bound the
	// process's requests to the API server (package internal/apiclient):
	// the operator and every controller take them.
	FlagKubeAPIQPS     = "kube-api-qps"
	FlagKubeAPIBurst   = "kube-api-burst"
	FlagKubeAPITimeout = "kube-api-timeout"
	// FlagGracefulShutdownTimeout bounds how long a controller's workers
	// take to finish on shutdown.
	FlagGracefulShutdownTimeout = "graceful-shutdown-timeout"
	// FlagKubeconfig is controller-runtime's --kubeconfig.
	FlagKubeconfig = "kubeconfig"

	// DefaultKubeAPIQPS is the sustained request rate of one process: far
	// above what a controller needs at steady state, so it only shapes a
	// bulk (a restart or a mass create), where the API server's priority
	// and fairness would otherwise answer with 429s.
	DefaultKubeAPIQPS = 300
	// DefaultKubeAPIBurst is how many requests may go at once above
	// DefaultKubeAPIQPS.
	DefaultKubeAPIBurst = 600
	// DefaultKubeAPITimeout bounds one request that is not a watch, so a
	// request the API server never answers frees its worker.
	DefaultKubeAPITimeout = 30 * time.Second

	// EnvPodNamespace tells the controller its namespace (the leader
	// Lease's); the operator sets it from the pod's metadata and a spec may
	// not override it.
	EnvPodNamespace = "POD_NAMESPACE"
	// EnvMemoryLimit tells a process its container's memory limit in bytes
	// (the downward API's resourceFieldRef limits.memory; the node's
	// allocatable memory when the container has no limit). The operator
	// sets it in every controller container and the chart in the
	// operator's; a spec may not override it. The binaries set Go's soft
	// memory limit to nine tenths of it unless $GOMEMLIMIT is set
	// (package internal/memlimit).
	EnvMemoryLimit = "PORTICO_MEMORY_LIMIT"
	// EnvIstioRootNamespace overrides Istio's root namespace for the
	// ratelimit controller (meshConfig.rootNamespace, istio-system by
	// default); set it with spec.controllers[].env.
	EnvIstioRootNamespace = "ISTIO_ROOT_NAMESPACE"

	// TerminationGracePeriodSeconds is how long a controller pod may take
	// to stop: its workers (up to --graceful-shutdown-timeout, 10 s) and,
	// when the APIGateway no longer wants it, its retirement (up to
	// RetireSeconds: the apirule controller takes its finalizer off every
	// APIRule, thousands at ~300 a second). A process that is not retiring
	// stops in well under a second, so rollouts do not wait for it.
	TerminationGracePeriodSeconds = 60
	// RetireSeconds bounds a controller's retirement.
	RetireSeconds = 45
)

// Flag renders a flag with its value as the operator passes it.
func Flag(name, value string) string { return "--" + name + "=" + value }

// version is stamped at build time:
// -ldflags "-X github.com/portico-dev/portico/internal/contract.version=v1.2.3".
var version = "v0.0.0-dev"

// VersionVariable is the fully qualified name of the version variable, for
// -ldflags -X.
const VersionVariable = Module + "/internal/contract.version"

// Module is Portico's Go module path (the root module: the API, the
// operator and the controllers).
const Module = "github.com/portico-dev/portico"

// Version is the version of every Portico binary; the operator uses it as
// the default image tag of the controllers.
func Version() string { return version }
