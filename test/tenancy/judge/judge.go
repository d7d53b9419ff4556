// Package judge decides, from the Istio objects stored in a cluster, what
// Istio would do with a request. The model lives in the product package
// internal/explain, which `kubectl portico explain` uses too, so the tool
// and the tenant-attack suite cannot disagree; this package keeps the names
// the suites have always used.
package judge

import (
	"github.com/portico-dev/portico/internal/explain"
)

// DefaultRootNamespace is Istio's root namespace unless the mesh says otherwise.
const DefaultRootNamespace = explain.DefaultRootNamespace

// The decisions of a sidecar.
const (
	Allowed         = explain.Allowed
	Unauthenticated = explain.Unauthenticated
	Forbidden       = explain.Forbidden
)

type (
	// Arrival is a request as it reaches the edge gateway.
	Arrival = explain.Arrival
	// EdgeGateway is the ingress gateway's view of client addresses.
	EdgeGateway = explain.EdgeGateway
	// Forwarded is what the gateway forwards to a backend.
	Forwarded = explain.Forwarded
	// Policies are the security objects of a cluster.
	Policies = explain.Policies
	// Workload is a pod's namespace and labels.
	Workload = explain.Workload
	// Token is a JWT as the judge sees it.
	Token = explain.Token
	// Place is where a token is read.
	Place = explain.Place
	// Peer is the caller of a workload.
	Peer = explain.Peer
	// Request is a request at a workload.
	Request = explain.Request
	// Decision is what the sidecar does with a request.
	Decision = explain.Decision
	// Verdict is a decision and why it was taken.
	Verdict = explain.Verdict
	// Destination is one backend of a route.
	Destination = explain.Destination
	// Routed is where a gateway sends a request.
	Routed = explain.Routed
	// Probe is a request as routing sees it.
	Probe = explain.Probe
)

// IngressGateway is the peer every request through the ingress gateway has.
var IngressGateway = explain.IngressGateway

// Judge decides what the sidecar does with r.
func Judge(p Policies, r Request) (Verdict, error) { return explain.Judge(p, r) }

// InHeader is a token place in a header.
func InHeader(name, prefix string) Place { return explain.InHeader(name, prefix) }

// InParam is a token place in a query parameter.
func InParam(name string) Place { return explain.InParam(name) }

// Route is where the VirtualServices bound to gateway send a request.
var Route = explain.Route

// RouteProbe is Route for a request with headers and query parameters.
var RouteProbe = explain.RouteProbe
