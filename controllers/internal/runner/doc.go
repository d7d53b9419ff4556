// Package runner is what every Portico gateway controller binary shares:
// the cobra command with the standard flags the operator passes (metrics and
// health addresses, leader election, log level, namespace to watch),
// manager set-up, /healthz and /readyz, metrics, graceful shutdown, and the
// CRD watchdog. Every client of the process except leader election's is
// bounded by --kube-api-qps, --kube-api-burst and --kube-api-timeout
// (package internal/apiclient).
//
// The watchdog keeps a controller from crash-looping or spamming errors when
// a CRD it needs is missing: an outer manager (leader election, probes,
// metrics, a schema-less CRD cache) runs the controller's workers in an inner
// manager only while every required CRD is Established and serves the
// required version. When one disappears the inner manager is stopped
// cleanly, /readyz fails and one line names the CRD; when it returns the
// workers start again without a process restart. Optional CRDs (watched when
// present) restart the workers when they come or go so their watches match
// the cluster.
//
// No object the API server accepts can stop a controller: every client of
// the process (caches, API reader, direct clients) goes through the
// quarantine guard (package quarantine), which passes on objects that do
// not decode into their Go types without their status, or leaves them out,
// and reports each one with a log line, a metric and a Warning Event on it.
//
// The contract with the operator (flags, ports, CRDs, version) comes from
// internal/contract. The package must not contain controller-specific logic.
package runner

// RBAC every controller needs: read CRDs (the watchdog) and hold its leader
// Lease in the namespace it runs in (leader election records a core Event on
// the Lease).
//
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=portico-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=events,verbs=create;patch
