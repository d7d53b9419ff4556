package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// Labels of the EnvoyFilters the ratelimit controller writes (its topology
// package is internal to it): managed by its binary, and naming the
// namespace whose RateLimits the filter enforces.
const (
	labelManagedBy       = "app.kubernetes.io/managed-by"
	labelRateLimitTenant = "gateway.portico.dev/ratelimit-namespace"
)

// Kinds the trackers are told about.
const (
	kindAPIRule               = "APIRule"
	kindVirtualService        = "VirtualService"
	kindHTTPRoute             = "HTTPRoute"
	kindAuthorizationPolicy   = "AuthorizationPolicy"
	kindRequestAuthentication = "RequestAuthentication"
	kindRateLimit             = "RateLimit"
	kindEnvoyFilter           = "EnvoyFilter"
)

// tracker decides convergence from informer events, incrementally: every
// event updates a few counters under the bench's lock.
type tracker interface {
	observe(e framework.Event)
	converged() bool
	progress() string
}

// completion is closed (once) when a tracker's condition first holds.
type completion struct {
	ch chan struct{}
	at time.Time
}

func newCompletion() *completion { return &completion{ch: make(chan struct{})} }

func (c *completion) complete(at time.Time) {
	select {
	case <-c.ch:
	default:
		c.at = at
		close(c.ch)
	}
}

func setMember(set map[string]bool, k string, in bool) {
	if in {
		set[k] = true
	} else {
		delete(set, k)
	}
}

// apiRuleTracker: every APIRule of one mode Ready for its generation and
// its objects present: the AuthorizationPolicy, for JWT rules the
// RequestAuthentication, and the mode's route (a VirtualService in Istio
// mode, in HTTPRoute mode an HTTPRoute and no VirtualService). It also
// notes when each APIRule's route first appeared, when (HTTPRoute mode)
// the Gateway's answer arrived and when the APIRule became Ready, to show
// where the time goes.
type apiRuleTracker struct {
	jwt   map[string]bool
	route string // kindVirtualService or kindHTTPRoute
	ready map[string]bool
	// present objects by kind, of expected APIRules only
	objects map[string]map[string]bool
	wantRA  int
	// routeAt, answeredAt and readyAt are the first times of each APIRule.
	routeAt, answeredAt, readyAt map[string]time.Time
}

func newAPIRuleTracker(jwt map[string]bool, route string) *apiRuleTracker {
	t := &apiRuleTracker{jwt: jwt, route: route, ready: map[string]bool{}, objects: map[string]map[string]bool{
		kindVirtualService: {}, kindHTTPRoute: {}, kindAuthorizationPolicy: {}, kindRequestAuthentication: {},
	}, routeAt: map[string]time.Time{}, answeredAt: map[string]time.Time{}, readyAt: map[string]time.Time{}}
	for _, withJWT := range jwt {
		if withJWT {
			t.wantRA++
		}
	}
	return t
}

func (t *apiRuleTracker) observe(e framework.Event) {
	k := key(e.Object.GetNamespace(), e.Object.GetName())
	withJWT, ok := t.jwt[k]
	if !ok {
		return
	}
	present := e.Type != framework.Deleted
	switch e.Kind {
	case kindAPIRule:
		setMember(t.ready, k, present && apiRuleReady(e.Object.(*gatewayv1alpha1.APIRule)))
		firstTime(t.readyAt, k, e.At, t.ready[k])
	case kindRequestAuthentication:
		setMember(t.objects[e.Kind], k, present && withJWT)
	case kindVirtualService, kindHTTPRoute, kindAuthorizationPolicy:
		setMember(t.objects[e.Kind], k, present)
		firstTime(t.routeAt, k, e.At, present && e.Kind == t.route)
		if route, ok := e.Object.(*gatewayapiv1.HTTPRoute); ok {
			firstTime(t.answeredAt, k, e.At, present && answered(route, route.Spec.ParentRefs))
		}
	}
}

func firstTime(times map[string]time.Time, k string, at time.Time, happened bool) {
	if _, seen := times[k]; happened && !seen {
		times[k] = at
	}
}

// otherRoute is the route kind the mode must not write.
func (t *apiRuleTracker) otherRoute() string {
	if t.route == kindHTTPRoute {
		return kindVirtualService
	}
	return kindHTTPRoute
}

func (t *apiRuleTracker) converged() bool {
	n := len(t.jwt)
	return len(t.ready) == n && len(t.objects[t.route]) == n && len(t.objects[t.otherRoute()]) == 0 &&
		len(t.objects[kindAuthorizationPolicy]) == n && len(t.objects[kindRequestAuthentication]) == t.wantRA
}

func (t *apiRuleTracker) progress() string {
	n := len(t.jwt)
	return fmt.Sprintf("Ready %d/%d, %ss %d/%d (%ss %d, want 0), AuthorizationPolicies %d/%d, RequestAuthentications %d/%d",
		len(t.ready), n, t.route, len(t.objects[t.route]), n, t.otherRoute(), len(t.objects[t.otherRoute()]),
		len(t.objects[kindAuthorizationPolicy]), n, len(t.objects[kindRequestAuthentication]), t.wantRA)
}

// timeline says, from t0, when the last route appeared, (HTTPRoute mode)
// when the last answer of the Gateway arrived, and when the last APIRule
// became Ready, with the median time per APIRule between these steps.
func (t *apiRuleTracker) timeline(t0 time.Time) string {
	last := func(times map[string]time.Time) time.Duration {
		var m time.Time
		for _, at := range times {
			if at.After(m) {
				m = at
			}
		}
		return m.Sub(t0)
	}
	between := func(from, to map[string]time.Time) time.Duration {
		var ds []time.Duration
		for k, at := range to {
			if f, ok := from[k]; ok {
				ds = append(ds, at.Sub(f))
			}
		}
		if len(ds) == 0 {
			return 0
		}
		return median(ds)
	}
	s := fmt.Sprintf("from the first create call: last %s written at %.2fs", t.route, last(t.routeAt).Seconds())
	if t.route == kindHTTPRoute {
		s += fmt.Sprintf(", last answer of the Gateway at %.2fs", last(t.answeredAt).Seconds())
	}
	s += fmt.Sprintf(", last APIRule Ready at %.2fs; per APIRule (median): %s written until Ready %s",
		last(t.readyAt).Seconds(), t.route, framework.FormatMilliseconds(between(t.routeAt, t.readyAt)))
	if t.route == kindHTTPRoute {
		s += fmt.Sprintf(" (written until answered %s, answered until Ready %s)",
			framework.FormatMilliseconds(between(t.routeAt, t.answeredAt)), framework.FormatMilliseconds(between(t.answeredAt, t.readyAt)))
	}
	return s
}

func apiRuleReady(r *gatewayv1alpha1.APIRule) bool {
	c := meta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation &&
		r.Status.ObservedGeneration == r.Generation
}

// rateLimitTracker: every RateLimit has the verdict its target calls for,
// every scope exactly one Enforced limit, every workload its final
// EnvoyFilter and no other EnvoyFilter exists.
type rateLimitTracker struct {
	limits map[string]scopeGroup
	groups int
	// reason is the Ready reason of each RateLimit whose condition is for
	// its generation.
	reason     map[string]string
	acceptable int                // limits whose reason matches their expectation
	enforced   map[scopeGroup]int // Enforced limits per group
	groupsOK   int                // groups with exactly one Enforced limit
	// wantEF maps the EnvoyFilters to write to their patches; presentEF
	// and okEF hold the managed ones there are, and those final, by key.
	wantEF    map[envoyFilterKey]int
	presentEF map[string]bool
	okEF      map[string]bool
	// reasons counts the current verdicts, for the report.
	reasons map[string]int
}

func newRateLimitTracker(p *plan) *rateLimitTracker {
	return &rateLimitTracker{
		limits: p.limits, groups: p.groups, reason: map[string]string{}, enforced: map[scopeGroup]int{},
		wantEF: p.envoyFilters, presentEF: map[string]bool{}, okEF: map[string]bool{}, reasons: map[string]int{},
	}
}

// accepts reports whether a limit of group may end with reason.
func accepts(group scopeGroup, reason string) bool {
	if group == "" {
		return reason == gatewayv1alpha1.ReasonTargetNotFound
	}
	return reason == gatewayv1alpha1.ReasonEnforced || reason == gatewayv1alpha1.ReasonConflicted
}

func (t *rateLimitTracker) observe(e framework.Event) {
	switch e.Kind {
	case kindRateLimit:
		t.observeLimit(e.Type, e.Object.(*gatewayv1alpha1.RateLimit))
	case kindEnvoyFilter:
		t.observeEnvoyFilter(e.Type, e.Object.(*networkingv1alpha3.EnvoyFilter))
	}
}

// currentReason is the Ready reason of a RateLimit's condition for its
// generation, or "".
func currentReason(typ framework.EventType, rl *gatewayv1alpha1.RateLimit) string {
	if typ == framework.Deleted {
		return ""
	}
	c := meta.FindStatusCondition(rl.Status.Conditions, gatewayv1alpha1.ConditionReady)
	if c == nil || c.ObservedGeneration != rl.Generation || rl.Status.ObservedGeneration != rl.Generation {
		return ""
	}
	return c.Reason
}

func (t *rateLimitTracker) observeLimit(typ framework.EventType, rl *gatewayv1alpha1.RateLimit) {
	k := key(rl.Namespace, rl.Name)
	group, ok := t.limits[k]
	before, now := t.reason[k], currentReason(typ, rl)
	if !ok || before == now {
		return
	}
	t.reasons[before]--
	t.reasons[now]++
	if accepts(group, before) {
		t.acceptable--
	}
	if accepts(group, now) {
		t.acceptable++
	}
	if group != "" {
		wasOK := t.enforced[group] == 1
		if before == gatewayv1alpha1.ReasonEnforced {
			t.enforced[group]--
		}
		if now == gatewayv1alpha1.ReasonEnforced {
			t.enforced[group]++
		}
		switch isOK := t.enforced[group] == 1; {
		case isOK && !wasOK:
			t.groupsOK++
		case !isOK && wasOK:
			t.groupsOK--
		}
	}
	if now == "" {
		delete(t.reason, k)
	} else {
		t.reason[k] = now
	}
}

func (t *rateLimitTracker) observeEnvoyFilter(typ framework.EventType, ef *networkingv1alpha3.EnvoyFilter) {
	if ef.Labels[labelManagedBy] != contract.RateLimit.Binary() {
		return
	}
	k := key(ef.Namespace, ef.Name)
	setMember(t.presentEF, k, typ != framework.Deleted)
	ok := false
	if typ != framework.Deleted && ef.Spec.WorkloadSelector != nil && len(ef.Spec.WorkloadSelector.Labels) == 1 {
		want, known := t.wantEF[envoyFilterKey{tenant: ef.Labels[labelRateLimitTenant], gateway: ef.Spec.WorkloadSelector.Labels[gatewaySelectorKey]}]
		ok = known && len(ef.Spec.ConfigPatches) == want
	}
	setMember(t.okEF, k, ok)
}

func (t *rateLimitTracker) converged() bool {
	return t.acceptable == len(t.limits) && t.groupsOK == t.groups &&
		len(t.presentEF) == len(t.wantEF) && len(t.okEF) == len(t.wantEF)
}

func (t *rateLimitTracker) progress() string {
	return fmt.Sprintf("verdicts as expected %d/%d, scopes with one Enforced limit %d/%d, EnvoyFilters final %d/%d (%d present)",
		t.acceptable, len(t.limits), t.groupsOK, t.groups, len(t.okEF), len(t.wantEF), len(t.presentEF))
}

// verdicts lists the current verdicts with their counts.
func (t *rateLimitTracker) verdicts() string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(t.reasons)) {
		if r != "" && t.reasons[r] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, t.reasons[r]))
		}
	}
	return strings.Join(parts, ", ")
}
