package explain

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// explainGatewayAPI is Explain in HTTPRoute mode: w.Gateway names a
// Gateway API Gateway.
func (e Explanation) explainGatewayAPI(w World, q Query, headers map[string]string) (Explanation, error) {
	gw := findAPIGateway(w.APIGateways, w.Gateway)
	var listener *gwapiv1.Listener
	if gw == nil {
		// A tenant may not read the administrator's Gateway: its own routes
		// naming it are taken as attached, and that is said.
		e.step("listener", fmt.Sprintf("Gateway %s (Gateway API) is not visible to you (or not in the cluster): its listeners are not checked, "+
			"and the routes you may read that name it are taken as attached", w.Gateway))
		gw, listener = unseenGateway(w.Gateway)
	} else {
		var taken Taken
		listener, taken = gatewayAPIListener(gw, q.Host, q.arriving())
		e.step("listener", taken.Finding, "Gateway "+w.Gateway)
		if taken.Outcome != "" {
			e.Outcome, e.Reason = taken.Outcome, taken.Reason
			return e, nil
		}
		e.Listener = w.Gateway + "/" + string(listener.Name)
	}
	attached, err := e.attachedRoutes(w, gw, listener, q.Host)
	if err != nil {
		return Explanation{}, err
	}
	if len(attached) == 0 {
		return e.notFound(w, q.Host), nil
	}
	p := Probe{Host: q.Host, Path: q.Path, Method: q.Method, Headers: headers, Query: q.Query, tls: q.TLS}
	taking, passed, err := takeRule(attached, p)
	if err != nil {
		return Explanation{}, err
	}
	e.passedRules(w, passed)
	if taking == nil {
		return e.notFound(w, q.Host), nil
	}
	route := taking.at.route
	e.HTTPRoute, e.Route = taking.key(), taking.ruleName()
	e.step("route", fmt.Sprintf("rule %q of HTTPRoute %s takes %s %s%s (match: %s)", e.Route, e.HTTPRoute, q.Method, q.Host, q.Path, describeMatch(taking.match)),
		"HTTPRoute "+e.HTTPRoute)
	behind, objects, apiRule := ruleBehindOwner(w, "HTTPRoute", e.HTTPRoute, route, e.Route, gatewayv1alpha1.HTTPRouteRuleName)
	if behind != "" {
		e.step("rule", behind, objects...)
	}
	pending := taking.at.accepted == ""
	if pending {
		e.step("status", fmt.Sprintf("HTTPRoute %s has no answer yet from the Gateway's implementation for this parent (pending): it may not be served", e.HTTPRoute))
	} else {
		e.step("status", "HTTPRoute "+e.HTTPRoute+" accepted: "+taking.at.why)
	}
	if taking.at.unresolved != "" {
		e.step("status", "the implementation reports unresolved backendRefs (ResolvedRefs False, "+taking.at.unresolved+"): it answers 500 for them")
	}
	e.rateLimitSteps(w, apiRule, q)
	done, err := e.httpRouteBackends(w, taking, p, q, headers)
	if err != nil || done {
		return e, err
	}
	if pending && e.Outcome == OutcomeRouted {
		e.Outcome, e.Reason = OutcomeUnknown, "the route is pending (no answer from the Gateway's implementation); if served: "+e.Reason
	}
	return e, nil
}

// httpRouteBackends applies the rule taken and judges its backends; done
// when the rule answers itself.
func (e *Explanation) httpRouteBackends(w World, taking *candidate, p Probe, q Query, headers map[string]string) (bool, error) {
	a, err := applyRule(*taking, p)
	if err != nil {
		return true, err
	}
	for _, n := range a.notes {
		e.step("filter", n)
	}
	if a.redirect != "" {
		e.Outcome, e.Reason = OutcomeRouted, "the gateway answers itself: redirect "+a.redirect+" (a RequestRedirect filter)"
		e.step("filter", e.Reason)
		return true, nil
	}
	e.Path = a.routed.Path
	if a.routed.Path != q.Path {
		e.step("rewrite", fmt.Sprintf("the backends receive path %s", a.routed.Path))
	}
	if len(a.routed.Destinations) == 0 {
		e.Outcome, e.Reason = Outcome500, "the rule has no backendRef with a weight: the implementation answers 500"
		e.step("backend", e.Reason)
		return true, nil
	}
	if taking.at.unresolved != "" {
		e.Outcome, e.Reason = OutcomeUnknown, "some backendRefs are unresolved (500 for the requests sent to them): "+taking.at.unresolved
		return true, nil
	}
	return false, e.judgeBackends(w, a.routed, q, headers)
}

// attachedRoutes lists the HTTPRoutes attached to the listener for the
// request's host and accepted (or pending): a route whose hostname covers
// the host but that does not attach, or that its implementation did not
// accept, is a step; only the routes of the most specific hostname count.
func (e *Explanation) attachedRoutes(w World, gw *gwapiv1.Gateway, l *gwapiv1.Listener, host string) ([]attachment, error) {
	var out []attachment
	best := -1
	for _, r := range w.HTTPRoutes {
		at, why, err := attach(r, gw, l, host, w.NamespaceLabels)
		if err != nil {
			return nil, fmt.Errorf("HTTPRoute %s/%s: %w", r.Namespace, r.Name, err)
		}
		key := r.Namespace + "/" + r.Name
		switch {
		case why != "" && coversHost(r, host):
			e.step("passed", fmt.Sprintf("HTTPRoute %s not attached to listener %s: %s%s", key, l.Name, why, implementationSays(r, gw)), "HTTPRoute "+key)
		case why != "":
		case at.accepted == string(metav1.ConditionFalse):
			e.step("passed", fmt.Sprintf("HTTPRoute %s is not accepted by its implementation, which does not serve it: %s", key, at.why), "HTTPRoute "+key)
		default:
			out = append(out, at)
			best = max(best, at.hostRank)
		}
	}
	kept := out[:0]
	for _, at := range out {
		if at.hostRank == best {
			kept = append(kept, at)
		} else {
			e.step("passed", fmt.Sprintf("HTTPRoute %s/%s not considered: another route's hostname covers %s more specifically", at.route.Namespace, at.route.Name, host))
		}
	}
	return kept, nil
}

// implementationSays is what the route's implementation reported for its
// parentRefs naming the Gateway gw, for a route this model does not attach.
func implementationSays(r *gwapiv1.HTTPRoute, gw *gwapiv1.Gateway) string {
	var says []string
	for _, ref := range r.Spec.ParentRefs {
		ns := r.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if string(ref.Name) != gw.Name || ns != gw.Namespace {
			continue
		}
		if accepted, why, _ := parentStatus(r, ref); accepted != "" {
			says = append(says, "Accepted "+accepted+", "+why)
		}
	}
	if len(says) == 0 {
		return ""
	}
	return "; its implementation says: " + strings.Join(says, "; ")
}

func coversHost(r *gwapiv1.HTTPRoute, host string) bool {
	for _, h := range r.Spec.Hostnames {
		if hostRank(string(h), host) >= 0 {
			return true
		}
	}
	return false
}

// takeRule is the match of the highest precedence the request meets, and
// the ones of higher precedence it does not meet, each with why.
func takeRule(attached []attachment, p Probe) (*candidate, []passedRule, error) {
	var passed []passedRule
	for _, c := range candidates(attached) {
		why, err := matchMismatch(c.match, p)
		if err != nil {
			return nil, nil, fmt.Errorf("HTTPRoute %s %s: %w", c.key(), c.ruleName(), err)
		}
		if why == "" {
			return &c, passed, nil
		}
		passed = append(passed, passedRule{c, why})
	}
	return nil, passed, nil
}

// passedRule is a match of higher precedence the request does not meet.
type passedRule struct {
	c   candidate
	why string
}

func (e *Explanation) passedRules(w World, passed []passedRule) {
	for i, p := range passed {
		if i == maxPassed {
			e.step("passed", fmt.Sprintf("and %d more matches of higher precedence", len(passed)-maxPassed))
			return
		}
		finding := fmt.Sprintf("rule %q of HTTPRoute %s not taken: %s", p.c.ruleName(), p.c.key(), p.why)
		behind, objects, _ := ruleBehindOwner(w, "HTTPRoute", p.c.key(), p.c.at.route, p.c.ruleName(), gatewayv1alpha1.HTTPRouteRuleName)
		if behind != "" {
			finding += " (" + behind + ")"
		}
		e.step("passed", finding, append([]string{"HTTPRoute " + p.c.key()}, objects...)...)
	}
}

// describeMatch says an HTTPRoute match as a step quotes it.
func describeMatch(m gwapiv1.HTTPRouteMatch) string {
	parts := []string{fmt.Sprintf("path %s %s", pathType(m), pathValue(m))}
	if m.Method != nil {
		parts = append(parts, "method "+string(*m.Method))
	}
	for _, h := range m.Headers {
		parts = append(parts, fmt.Sprintf("header %s %q", h.Name, h.Value))
	}
	for _, q := range m.QueryParams {
		parts = append(parts, fmt.Sprintf("query parameter %s %q", q.Name, q.Value))
	}
	return strings.Join(parts, ", ")
}

// unseenGateway stands for a Gateway the caller may not read: a listener
// without name or port, for every host and namespace, which every
// parentRef naming the Gateway attaches to.
func unseenGateway(key string) (*gwapiv1.Gateway, *gwapiv1.Listener) {
	ns, name, _ := strings.Cut(key, "/")
	all := gwapiv1.NamespacesFromAll
	gw := &gwapiv1.Gateway{}
	gw.Namespace, gw.Name = ns, name
	return gw, &gwapiv1.Listener{AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &all}}}
}

func findAPIGateway(gws []*gwapiv1.Gateway, key string) *gwapiv1.Gateway {
	for _, gw := range gws {
		if gw.Namespace+"/"+gw.Name == key {
			return gw
		}
	}
	return nil
}
