package explain

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HTTPRoute mode: how a Gateway API Gateway takes a request. The listener
// of the request's port, protocol and host (the most specific hostname);
// the HTTPRoutes attached to it (a parentRef naming the Gateway, and the
// listener by sectionName or port if it names one; the listener's
// allowedRoutes namespaces and kinds; a hostname covering the request's)
// and what their implementation reported (status.parents: a route not
// Accepted is said and left out; one without an answer is pending); among
// the routes of the most specific hostname, the Gateway API's match
// precedence (an exact path, then the longest prefix, then regular
// expressions, which the Gateway API leaves to the implementation and
// which this model ranks after prefixes as Istio does; then a method,
// more header matches, more query parameter matches; then the oldest
// route, its namespace/name, the first rule and match); then the rule's
// filters and weighted backendRefs.

// gatewayAPIListener finds the listener of gw that takes a request to host
// arriving as a: of its port and protocol (HTTP, or HTTPS over TLS), the
// one whose hostname covers host most specifically (no hostname covers
// every host).
func gatewayAPIListener(gw *gwapiv1.Gateway, host string, a Arriving) (*gwapiv1.Listener, Taken) {
	key := gw.Namespace + "/" + gw.Name
	port := a.DefaultPort()
	protocol := gwapiv1.HTTPProtocolType
	if a.TLS {
		protocol = gwapiv1.HTTPSProtocolType
	}
	var best *gwapiv1.Listener
	bestRank, onPort := -1, false
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		if uint32(l.Port) != port || l.Protocol != protocol {
			continue
		}
		onPort = true
		if rank := hostRank(listenerHostname(l), host); rank > bestRank {
			best, bestRank = l, rank
		}
	}
	switch {
	case !onPort:
		why := fmt.Sprintf("no %s listener of Gateway %s on port %d: the connection is refused", protocol, key, port)
		return nil, Taken{Finding: why, Outcome: OutcomeRefused, Reason: why}
	case best == nil && a.TLS:
		why := fmt.Sprintf("no listener of Gateway %s on port %d has a hostname covering %s", key, port, host)
		return nil, Taken{Finding: why, Outcome: OutcomeRefused, Reason: why + ": the TLS handshake fails"}
	case best == nil:
		why := fmt.Sprintf("no listener of Gateway %s on port %d has a hostname covering %s", key, port, host)
		return nil, Taken{Finding: why, Outcome: Outcome404, Reason: why}
	}
	finding := fmt.Sprintf("listener %s of Gateway %s: port %d, %s, hostname %s", best.Name, key, best.Port, best.Protocol, listenerHostname(best))
	if best.TLS != nil && best.TLS.Mode != nil {
		finding += ", TLS " + string(*best.TLS.Mode)
	}
	return best, Taken{Finding: finding}
}

func listenerHostname(l *gwapiv1.Listener) string {
	if l.Hostname == nil || *l.Hostname == "" {
		return "*"
	}
	return string(*l.Hostname)
}

// attachment is an HTTPRoute attached to the listener, with how specific
// its hostname covering the request's host is and what its implementation
// reported for this parent.
type attachment struct {
	route    *gwapiv1.HTTPRoute
	hostRank int
	// accepted is the Accepted condition's status ("" when the
	// implementation has not answered for this parent); why its reason and
	// message; unresolved the ResolvedRefs condition's when it is False.
	accepted, why, unresolved string
}

// attach decides whether route attaches to listener l of gw for a request
// to host: the reason it does not, or its attachment. namespaces holds the
// labels of the namespaces the caller may read (allowedRoutes selectors).
func attach(route *gwapiv1.HTTPRoute, gw *gwapiv1.Gateway, l *gwapiv1.Listener, host string, namespaces map[string]map[string]string) (attachment, string, error) {
	ref := slices.IndexFunc(route.Spec.ParentRefs, func(p gwapiv1.ParentReference) bool { return refersTo(p, route.Namespace, gw, l) })
	if ref < 0 {
		return attachment{}, "no parentRef names the Gateway and this listener", nil
	}
	if why, err := allowedBy(l, gw.Namespace, route.Namespace, namespaces); why != "" || err != nil {
		return attachment{}, why, err
	}
	rank := -1
	for _, h := range route.Spec.Hostnames {
		rank = max(rank, hostRank(string(h), host))
	}
	if len(route.Spec.Hostnames) == 0 {
		rank = hostRank(listenerHostname(l), host)
	}
	if rank < 0 {
		return attachment{}, "no hostname of the route covers " + host, nil
	}
	a := attachment{route: route, hostRank: rank}
	a.accepted, a.why, a.unresolved = parentStatus(route, route.Spec.ParentRefs[ref])
	return a, "", nil
}

// refersTo reports whether a parentRef of a route of namespace ns names
// the Gateway gw and admits its listener l.
func refersTo(p gwapiv1.ParentReference, ns string, gw *gwapiv1.Gateway, l *gwapiv1.Listener) bool {
	group, kind, namespace := gwapiv1.GroupName, "Gateway", ns
	if p.Group != nil {
		group = string(*p.Group)
	}
	if p.Kind != nil {
		kind = string(*p.Kind)
	}
	if p.Namespace != nil {
		namespace = string(*p.Namespace)
	}
	unseen := l.Name == "" // unseenGateway's listener
	return group == gwapiv1.GroupName && kind == "Gateway" && namespace == gw.Namespace && string(p.Name) == gw.Name &&
		(p.SectionName == nil || *p.SectionName == l.Name || unseen) && (p.Port == nil || *p.Port == l.Port || unseen)
}

// allowedBy is why listener l of a Gateway of namespace gwNamespace does
// not admit HTTPRoutes of namespace ns ("" if it does): allowedRoutes
// namespaces (Same by default) and kinds.
func allowedBy(l *gwapiv1.Listener, gwNamespace, ns string, namespaces map[string]map[string]string) (string, error) {
	from, allowed := gwapiv1.NamespacesFromSame, l.AllowedRoutes
	if allowed != nil && allowed.Namespaces != nil && allowed.Namespaces.From != nil {
		from = *allowed.Namespaces.From
	}
	if allowed != nil && len(allowed.Kinds) > 0 && !slices.ContainsFunc(allowed.Kinds, func(k gwapiv1.RouteGroupKind) bool {
		return k.Kind == "HTTPRoute" && (k.Group == nil || string(*k.Group) == gwapiv1.GroupName)
	}) {
		return fmt.Sprintf("listener %s admits no HTTPRoutes (allowedRoutes kinds)", l.Name), nil
	}
	switch from {
	case gwapiv1.NamespacesFromAll:
		return "", nil
	case gwapiv1.NamespacesFromSame:
		if ns != gwNamespace {
			return fmt.Sprintf("listener %s admits routes of the Gateway's namespace only (allowedRoutes from Same)", l.Name), nil
		}
		return "", nil
	case gwapiv1.NamespacesFromSelector:
		nsLabels, ok := namespaces[ns]
		if !ok {
			return "", fmt.Errorf("listener %s selects namespaces by label, and the labels of namespace %s are not visible", l.Name, ns)
		}
		sel, err := metav1.LabelSelectorAsSelector(allowed.Namespaces.Selector)
		if err != nil {
			return "", fmt.Errorf("listener %s: %w", l.Name, err)
		}
		if !sel.Matches(labels.Set(nsLabels)) {
			return fmt.Sprintf("listener %s's namespace selector does not select the route's namespace", l.Name), nil
		}
		return "", nil
	}
	return fmt.Sprintf("listener %s admits routes of no namespace (allowedRoutes from %s)", l.Name, from), nil
}

// parentStatus is what the implementation reported for the route's
// parentRef: the Accepted condition's status, its reason and message, and
// the ResolvedRefs condition's reason and message when it is False.
func parentStatus(route *gwapiv1.HTTPRoute, ref gwapiv1.ParentReference) (accepted, why, unresolved string) {
	for _, s := range route.Status.Parents {
		if !sameParent(s.ParentRef, ref, route.Namespace) {
			continue
		}
		if c := meta.FindStatusCondition(s.Conditions, string(gwapiv1.RouteConditionAccepted)); c != nil && c.ObservedGeneration == route.Generation {
			accepted, why = string(c.Status), fmt.Sprintf("%s: %s (%s)", c.Reason, c.Message, s.ControllerName)
		}
		if c := meta.FindStatusCondition(s.Conditions, string(gwapiv1.RouteConditionResolvedRefs)); c != nil && c.Status == metav1.ConditionFalse {
			unresolved = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	return accepted, why, unresolved
}

func sameParent(a, b gwapiv1.ParentReference, ns string) bool {
	namespace := func(p gwapiv1.ParentReference) string {
		if p.Namespace != nil {
			return string(*p.Namespace)
		}
		return ns
	}
	section := func(p gwapiv1.ParentReference) string {
		if p.SectionName != nil {
			return string(*p.SectionName)
		}
		return ""
	}
	return a.Name == b.Name && namespace(a) == namespace(b) && section(a) == section(b)
}

// candidate is one match of one rule of an attached HTTPRoute.
type candidate struct {
	at         attachment
	rule, prio int
	match      gwapiv1.HTTPRouteMatch
}

// ruleName is the HTTPRoute rule's name, else its index.
func (c candidate) ruleName() string {
	rules := c.at.route.Spec.Rules
	if c.rule < len(rules) && rules[c.rule].Name != nil {
		return string(*rules[c.rule].Name)
	}
	return fmt.Sprintf("rules[%d]", c.rule)
}

func (c candidate) key() string { return c.at.route.Namespace + "/" + c.at.route.Name }

// defaultMatch is the Gateway API's default: a prefix match of "/".
func defaultMatch() gwapiv1.HTTPRouteMatch {
	prefix, root := gwapiv1.PathMatchPathPrefix, "/"
	return gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: &root}}
}

// candidates lists every match of the routes' rules in precedence order.
func candidates(attached []attachment) []candidate {
	var out []candidate
	for _, at := range attached {
		rules := at.route.Spec.Rules
		if len(rules) == 0 {
			rules = []gwapiv1.HTTPRouteRule{{}}
		}
		for i, r := range rules {
			matches := r.Matches
			if len(matches) == 0 {
				matches = []gwapiv1.HTTPRouteMatch{defaultMatch()}
			}
			for j, m := range matches {
				if m.Path == nil {
					m.Path = defaultMatch().Path
				}
				out = append(out, candidate{at: at, rule: i, prio: j, match: m})
			}
		}
	}
	slices.SortStableFunc(out, precedence)
	return out
}

// precedence orders two candidates as the Gateway API ranks matches.
func precedence(a, b candidate) int {
	for _, c := range []int{
		pathRank(b.match) - pathRank(a.match),
		len(pathValue(b.match)) - len(pathValue(a.match)),
		boolRank(b.match.Method != nil) - boolRank(a.match.Method != nil),
		len(b.match.Headers) - len(a.match.Headers),
		len(b.match.QueryParams) - len(a.match.QueryParams),
		a.at.route.CreationTimestamp.Compare(b.at.route.CreationTimestamp.Time),
		strings.Compare(a.key(), b.key()),
		a.rule - b.rule,
		a.prio - b.prio,
	} {
		if c != 0 {
			return c
		}
	}
	return 0
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pathType(m gwapiv1.HTTPRouteMatch) gwapiv1.PathMatchType {
	if m.Path == nil || m.Path.Type == nil {
		return gwapiv1.PathMatchPathPrefix
	}
	return *m.Path.Type
}

func pathValue(m gwapiv1.HTTPRouteMatch) string {
	if m.Path == nil || m.Path.Value == nil {
		return "/"
	}
	return *m.Path.Value
}

// pathRank: Exact over PathPrefix over RegularExpression.
func pathRank(m gwapiv1.HTTPRouteMatch) int {
	switch pathType(m) {
	case gwapiv1.PathMatchExact:
		return 3
	case gwapiv1.PathMatchPathPrefix:
		return 2
	}
	return 1
}

// prefixCovers applies a PathPrefix match: whole path elements, a final
// '/' of the prefix ignored.
func prefixCovers(prefix, path string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// matchMismatch is the first condition of an HTTPRoute match the request
// fails ("" when it meets them all).
func matchMismatch(m gwapiv1.HTTPRouteMatch, p Probe) (string, error) {
	value := pathValue(m)
	switch pathType(m) {
	case gwapiv1.PathMatchExact:
		if p.Path != value {
			return fmt.Sprintf("path %q is not exactly %q", p.Path, value), nil
		}
	case gwapiv1.PathMatchPathPrefix:
		if !prefixCovers(value, p.Path) {
			return fmt.Sprintf("path %q is not under prefix %q", p.Path, value), nil
		}
	default:
		if ok, err := fullMatch(value, p.Path); err != nil || !ok {
			return fmt.Sprintf("path %q does not match regex %q", p.Path, value), err
		}
	}
	if m.Method != nil && string(*m.Method) != p.Method {
		return fmt.Sprintf("method %q is not %s", p.Method, *m.Method), nil
	}
	for _, h := range m.Headers {
		v, ok := p.header(string(h.Name))
		if why, err := valueMismatch("header", string(h.Name), h.Type == nil || *h.Type == gwapiv1.HeaderMatchExact, h.Value, v, ok); why != "" || err != nil {
			return why, err
		}
	}
	for _, q := range m.QueryParams {
		v, ok := p.param(string(q.Name))
		if why, err := valueMismatch("query parameter", string(q.Name), q.Type == nil || *q.Type == gwapiv1.QueryParamMatchExact, q.Value, v, ok); why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

func valueMismatch(what, name string, exact bool, want, got string, present bool) (string, error) {
	switch {
	case !present:
		return fmt.Sprintf("%s %s is absent", what, name), nil
	case exact && got != want:
		return fmt.Sprintf("%s %s %q is not %q", what, name, got, want), nil
	case !exact:
		ok, err := fullMatch(want, got)
		if err != nil || !ok {
			return fmt.Sprintf("%s %s %q does not match regex %q", what, name, got, want), err
		}
	}
	return "", nil
}

// fullMatch applies an RE2 expression to the whole value, as Envoy does.
func fullMatch(expr, value string) (bool, error) {
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return false, fmt.Errorf("regex %q: %w", expr, err)
	}
	return re.MatchString(value), nil
}
