package explain

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// Outcome is what a client gets for a request, as `portico explain` says it.
type Outcome string

// The outcomes.
const (
	// Outcome404: no route of the gateway takes the request.
	Outcome404 Outcome = "404"
	// OutcomeRouted: the request reaches a backend's pod.
	OutcomeRouted Outcome = "routed"
	// Outcome401: a presented token is not valid for the backend.
	Outcome401 Outcome = "401"
	// Outcome403: the backend's AuthorizationPolicies deny the request.
	Outcome403 Outcome = "403"
	// OutcomeUnknown: the objects the caller may read do not decide it, or
	// the backends of a weighted route decide differently, or the route is
	// pending (HTTPRoute mode: no answer from its implementation yet).
	OutcomeUnknown Outcome = "unknown"
	// OutcomeRefused: no listener takes the connection (no server or
	// listener on the port, a TLS host no server covers, a client
	// certificate the server requires and does not get or trust).
	OutcomeRefused Outcome = "refused"
	// OutcomeAuthorizer: a CUSTOM policy hands the request to an external
	// authorizer, whose answer (a login redirect, 401, or letting it on)
	// is not configuration.
	OutcomeAuthorizer Outcome = "authorizer"
	// Outcome500: the route has no backend to send to (HTTPRoute mode:
	// no backendRef with a weight).
	Outcome500 Outcome = "500"
)

// World is what the caller may read of a cluster: every object here was
// read with the caller's own credentials, and Hidden says what it could
// not read, so that an explanation never shows, nor guesses from, what the
// caller's RBAC does not let it read.
type World struct {
	// Gateway is the gateway ("namespace/name") the request arrives at: an
	// Istio Gateway, or with GatewayAPI a Gateway API Gateway (HTTPRoute
	// mode).
	Gateway    string
	GatewayAPI bool
	Edge       EdgeGateway
	// IstioGateways and APIGateways are the Gateways the caller may read:
	// their servers and listeners take requests.
	IstioGateways []*networkingv1.Gateway
	APIGateways   []*gwapiv1.Gateway
	// HTTPRoutes are the HTTPRoutes the caller may read (HTTPRoute mode).
	HTTPRoutes []*gwapiv1.HTTPRoute
	// NamespaceLabels are the labels of the namespaces the caller may read,
	// for listeners that admit routes by a namespace selector.
	NamespaceLabels map[string]map[string]string
	// ClientCAs are the client CA bundles (PEM) of MUTUAL servers the
	// caller may read, by credential name.
	ClientCAs       map[string][]byte
	VirtualServices []*networkingv1.VirtualService
	// APIRules are the APIRules the caller may read, to name the rule
	// behind a route.
	APIRules []*gatewayv1alpha1.APIRule
	// RateLimits are the RateLimits the caller may read.
	RateLimits []*gatewayv1alpha1.RateLimit
	Policies   Policies
	// Workloads are the pod labels of the Services the caller may read
	// (their selectors), by "namespace/name".
	Workloads map[string]map[string]string
	// Hidden lists what the caller may not read ("VirtualServices in
	// namespace team-b", "AuthorizationPolicies cluster-wide"), each a
	// phrase; an explanation qualifies its findings with it.
	Hidden []string
	// ForeignHosts are the hosts the caller may learn are owned by
	// another namespace (from its APIRules' statuses), never which.
	ForeignHosts []string
}

// Query is the request to explain, as the client sends it.
type Query struct {
	Host, Path, Method string
	// Headers the client sends, by name (compared regardless of case).
	Headers map[string]string
	Query   url.Values
	// Token is the JWT presented, or nil.
	Token *Token
	// Peer is the address the gateway's connection comes from: the
	// client's, or the last proxy's in front of the gateway (which, like
	// the client, may have written X-Forwarded-For in Headers).
	Peer netip.Addr
	// Port is the gateway's port the request arrives on (0: 443 with TLS,
	// else 80); TLS whether it comes over TLS, presenting ClientCert (PEM,
	// nil for none).
	Port       uint32
	TLS        bool
	ClientCert []byte
}

func (q Query) arriving() Arriving {
	return Arriving{Port: q.Port, TLS: q.TLS, ClientCert: q.ClientCert}
}

// Step is one stage of an explanation: what was looked at, what it found,
// and the objects behind it ("Kind namespace/name").
type Step struct {
	Stage   string   `json:"stage"`
	Finding string   `json:"finding"`
	Objects []string `json:"objects,omitempty"`
}

// Backend is one destination of the route and its sidecar's verdict.
type Backend struct {
	Service   string  `json:"service"`
	Namespace string  `json:"namespace"`
	Port      uint32  `json:"port,omitempty"`
	Outcome   Outcome `json:"outcome"`
	Reason    string  `json:"reason"`
}

// Explanation is what would happen to a request, step by step.
type Explanation struct {
	Steps    []Step    `json:"steps"`
	Backends []Backend `json:"backends,omitempty"`
	// Listener names the server or listener that takes the request
	// ("namespace/gateway/name").
	Listener string `json:"listener,omitempty"`
	// VirtualService or HTTPRoute ("namespace/name") and Route name the
	// route taken (an HTTPRoute rule's name, or rules[i]); empty for a 404.
	VirtualService string `json:"virtualService,omitempty"`
	HTTPRoute      string `json:"httpRoute,omitempty"`
	Route          string `json:"route,omitempty"`
	// Path is the path the backends receive, after the route's rewrite.
	Path    string  `json:"path,omitempty"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason"`
}

// Explain says what the gateway and the backends' sidecars would do with
// q over the objects of w, with the same model the tenant-attack suite
// judges with (Route, Forward, Judge). An error is something the model
// does not cover; it never guesses.
func Explain(w World, q Query) (Explanation, error) {
	var e Explanation
	if len(w.Hidden) > 0 {
		e.step("visibility", "not visible to you: "+strings.Join(w.Hidden, "; ")+"; what follows is over the objects you may read")
	}
	e.step("gateway", fmt.Sprintf("the request arrives at gateway %s", w.Gateway), "Gateway "+w.Gateway)
	headers := map[string]string{}
	for k, v := range q.Headers {
		headers[strings.ToLower(k)] = v
	}
	if w.GatewayAPI {
		return e.explainGatewayAPI(w, q, headers)
	}
	vss, done := e.istioListener(w, q)
	if done {
		return e, nil
	}
	route, err := RouteProbe(vss, w.Gateway, Probe{Host: q.Host, Path: q.Path, Method: q.Method, Headers: headers, Query: q.Query})
	if err != nil {
		return Explanation{}, err
	}
	if route == nil {
		return e.notFound(w, q.Host), nil
	}
	e.passedSteps(w, route.Passed)
	e.VirtualService, e.Route = route.VirtualService, route.Route
	e.step("route", fmt.Sprintf("route %q of VirtualService %s takes %s %s%s", route.Route, route.VirtualService, q.Method, q.Host, q.Path),
		"VirtualService "+route.VirtualService)
	behind, objects, apiRule := ruleBehind(w, route.VirtualService, route.Route)
	if behind != "" {
		e.step("rule", behind, objects...)
	}
	e.rateLimitSteps(w, apiRule, q)
	e.Path = route.Path
	if route.Path != q.Path {
		e.step("rewrite", fmt.Sprintf("the backends receive path %s", route.Path))
	}
	if len(route.Destinations) == 0 {
		e.Outcome, e.Reason = OutcomeRouted, "the route answers itself (redirect or direct response)"
		return e, nil
	}
	return e, e.judgeBackends(w, route, q, headers)
}

// istioListener is the listener step of Istio mode: the server of the
// Istio Gateway that takes the request, and the VirtualServices it
// admits; done when the listener decides the request itself. A Gateway
// the caller may not read is said, and every VirtualService considered.
func (e *Explanation) istioListener(w World, q Query) ([]*networkingv1.VirtualService, bool) {
	var gw *networkingv1.Gateway
	for _, g := range w.IstioGateways {
		if g.Namespace+"/"+g.Name == w.Gateway {
			gw = g
		}
	}
	if gw == nil {
		e.step("listener", fmt.Sprintf("Gateway %s is not visible to you (or not in the cluster): its servers are not checked", w.Gateway))
		return w.VirtualServices, false
	}
	taken := istioServer(gw, q.Host, q.arriving(), w.ClientCAs)
	e.step("listener", taken.Finding, "Gateway "+w.Gateway)
	if taken.Outcome != "" {
		e.Outcome, e.Reason = taken.Outcome, taken.Reason
		return nil, true
	}
	e.Listener = w.Gateway + "/" + taken.server
	return admitted(w.VirtualServices, gw, taken), false
}

// judgeBackends judges each destination of the route taken, after the
// gateway's forwarding, and combines their verdicts.
func (e *Explanation) judgeBackends(w World, route *Routed, q Query, headers map[string]string) error {
	peer := q.Peer
	if !peer.IsValid() {
		peer = IngressGateway.RemoteIP
	}
	fwd, err := w.Edge.Forward(route, Arrival{Peer: peer, Headers: headers})
	if err != nil {
		return err
	}
	for _, d := range route.Destinations {
		b, err := judgeBackend(w, d, fwd.At(Workload{}, q.Host, route.Path, q.Method), q.Token)
		if err != nil {
			return err
		}
		e.Backends = append(e.Backends, b)
		var objects []string
		if b.Outcome != OutcomeUnknown {
			objects = append(objects, "Service "+d.Namespace+"/"+d.Service)
		}
		e.step("backend", fmt.Sprintf("%s (as the route names it): %s (%s)", d.Host, b.Outcome, b.Reason), objects...)
	}
	e.Outcome, e.Reason = combine(e.Backends)
	return nil
}

func (e *Explanation) step(stage, finding string, objects ...string) {
	e.Steps = append(e.Steps, Step{Stage: stage, Finding: finding, Objects: objects})
}

// notFound is the 404 of a request no visible route takes: a host owned
// by another namespace is said as such, and a caller who may not read
// everything is told that its 404 is over what it may read.
func (e Explanation) notFound(w World, host string) Explanation {
	e.Outcome = Outcome404
	switch {
	case slices.ContainsFunc(w.ForeignHosts, func(h string) bool { return strings.EqualFold(h, host) }):
		e.Reason = "a host owned by another namespace: none of your routes take it"
	case len(w.Hidden) > 0:
		e.Reason = "no route you may read takes the request; objects you may not read might"
	default:
		e.Reason = "no route of the gateway takes the request"
	}
	e.step("route", e.Reason)
	return e
}

// judgeBackend is the sidecar's verdict at one destination, whose pods are
// those its Service selects; a Service the caller may not read is unknown.
func judgeBackend(w World, d Destination, r Request, token *Token) (Backend, error) {
	b := Backend{Service: d.Service, Namespace: d.Namespace, Port: d.Port}
	labels, ok := w.Workloads[d.Namespace+"/"+d.Service]
	if d.Service == "" || !ok {
		b.Outcome, b.Reason = OutcomeUnknown, "its Service is not visible to you (or not in the cluster), so its pods' policies are unknown"
		return b, nil
	}
	r.Workload = Workload{Namespace: d.Namespace, Labels: labels}
	r.Token = token
	v, err := Judge(w.Policies, r)
	if err != nil {
		return Backend{}, fmt.Errorf("backend %s/%s: %w", d.Namespace, d.Service, err)
	}
	b.Reason = v.Reason
	switch v.Decision {
	case Allowed:
		b.Outcome = OutcomeRouted
	case Unauthenticated:
		b.Outcome = Outcome401
	case Forbidden:
		b.Outcome = Outcome403
		if v.Authorizer != "" {
			b.Outcome = OutcomeAuthorizer
		}
	default:
		b.Outcome = OutcomeUnknown
	}
	return b, nil
}

// combine is the outcome of a route over its backends: theirs when they
// agree, unknown when a weighted split decides differently per backend.
func combine(backends []Backend) (Outcome, string) {
	first := backends[0]
	for _, b := range backends[1:] {
		if b.Outcome != first.Outcome {
			return OutcomeUnknown, "the route's backends decide differently; the outcome depends on the backend the weights pick"
		}
	}
	return first.Outcome, first.Reason
}
