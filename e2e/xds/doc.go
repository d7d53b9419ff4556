// Package xds is an Envoy xDS client for the e2e's stand-ins: one
// state-of-the-world ADS stream (go-control-plane's types over gRPC) on
// which it asks for clusters (CDS) and listeners (LDS), then for the
// endpoints (EDS) of the clusters and the route configurations (RDS) the
// listeners name, ACKs what it accepts and NACKs (with the error) what
// does not decode or validate, keeping the last good version. It presents
// itself as an Istio proxy (node id and metadata as istio-agent sends
// them) so that istiod computes for it what it computes for an Envoy of
// that workload.
//
// It owns the protocol and the snapshot of what the control plane said;
// it does not interpret the configuration (e2e/envoy does) and never
// talks to the Kubernetes API.
package xds
