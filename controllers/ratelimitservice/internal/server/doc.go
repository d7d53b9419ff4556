// Package server runs the rate-limit service's process: the gRPC server of
// package service, the ConfigMap and Secret watch of package config, the
// Redis connection and pinger of package store, /healthz and /readyz, and
// Prometheus metrics. Every replica serves: nothing is leader-elected.
//
// /readyz is ready once both watches have synced and while Redis answers
// its ping (every PingInterval, and at once after a failed decision), so
// that the Service sends Envoy's calls only to replicas that can answer
// and the APIGateway shows the component not ready while Redis is
// unreachable. /healthz only says the process runs.
//
// The package owns the wiring, not the decisions.
package server
