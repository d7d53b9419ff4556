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

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/framework"
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

// apiRuleTracker: every APIRule Ready for its generation and its Istio
// objects present.
type apiRuleTracker struct {
	jwt   map[string]bool
	ready map[string]bool
	// present Istio objects by kind, of expected APIRules only
	objects map[string]map[string]bool
	wantRA  int
}

func newAPIRuleTracker(p *plan) *apiRuleTracker {
	t := &apiRuleTracker{jwt: p.jwt, ready: map[string]bool{}, objects: map[string]map[string]bool{
		kindVirtualService: {}, kindAuthorizationPolicy: {}, kindRequestAuthentication: {},
	}}
	for _, withJWT := range p.jwt {
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
	case kindRequestAuthentication:
		setMember(t.objects[e.Kind], k, present && withJWT)
	case kindVirtualService, kindAuthorizationPolicy:
		setMember(t.objects[e.Kind], k, present)
	}
}

func (t *apiRuleTracker) converged() bool {
	n := len(t.jwt)
	return len(t.ready) == n && len(t.objects[kindVirtualService]) == n &&
		len(t.objects[kindAuthorizationPolicy]) == n && len(t.objects[kindRequestAuthentication]) == t.wantRA
}

func (t *apiRuleTracker) progress() string {
	n := len(t.jwt)
	return fmt.Sprintf("Ready %d/%d, VirtualServices %d/%d, AuthorizationPolicies %d/%d, RequestAuthentications %d/%d",
		len(t.ready), n, len(t.objects[kindVirtualService]), n, len(t.objects[kindAuthorizationPolicy]), n,
		len(t.objects[kindRequestAuthentication]), t.wantRA)
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
