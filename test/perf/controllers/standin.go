package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// standInWorkers is how many status writes the stand-in makes at a time.
const standInWorkers = 4

// standIn plays the controller of the bench's Gateway API Gateways, as no
// Gateway API implementation runs on the kwok cluster: for every HTTPRoute
// with a parentRef to one of them, it writes the route's status.parents
// entry for that parent with Accepted=True and ResolvedRefs=True at the
// route's generation, under its own controllerName, keeping other
// controllers' entries — what a real implementation writes once it has
// programmed the route (it does no data-plane work, so it answers faster
// than one would). It learns of routes from the bench's informer and writes
// with its own client, through a deduplicating work queue, so a route that
// changes while its answer is being written is answered once more.
type standIn struct {
	c        client.Client
	gateways map[types.NamespacedName]bool

	mu sync.Mutex
	// routes are the latest version of every route that names one of the
	// gateways; waiting maps each route whose current generation is not
	// answered yet to when the stand-in first saw that generation.
	routes  map[types.NamespacedName]*gatewayapiv1.HTTPRoute
	waiting map[types.NamespacedName]waitingSince
	// latencies are, per answer, the time from the first event of the
	// route's generation until the status write returned; calls are the
	// durations of the status write calls alone.
	latencies, calls []time.Duration
	conflicts        int

	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
	wg    sync.WaitGroup
}

type waitingSince struct {
	generation int64
	since      time.Time
}

func newStandIn(c client.Client, gateways []*gatewayapiv1.Gateway) *standIn {
	s := &standIn{
		c: c, gateways: map[types.NamespacedName]bool{},
		routes: map[types.NamespacedName]*gatewayapiv1.HTTPRoute{}, waiting: map[types.NamespacedName]waitingSince{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "bench-gateway-stand-in"}),
	}
	for _, gw := range gateways {
		s.gateways[client.ObjectKeyFromObject(gw)] = true
	}
	return s
}

// start runs the status writers until stop.
func (s *standIn) start(ctx context.Context) {
	for range standInWorkers {
		s.wg.Go(func() {
			for s.next(ctx) {
			}
		})
	}
}

// stop ends the writers and waits for them.
func (s *standIn) stop() {
	s.queue.ShutDown()
	s.wg.Wait()
}

// observe takes an informer event of an HTTPRoute.
func (s *standIn) observe(e framework.Event) {
	route, ok := e.Object.(*gatewayapiv1.HTTPRoute)
	if !ok {
		return
	}
	k := client.ObjectKeyFromObject(route)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Type == framework.Deleted || len(s.parents(route)) == 0 {
		delete(s.routes, k)
		delete(s.waiting, k)
		return
	}
	s.routes[k] = route
	if answered(route, s.parents(route)) {
		delete(s.waiting, k)
		return
	}
	if w, ok := s.waiting[k]; !ok || w.generation != route.Generation {
		s.waiting[k] = waitingSince{generation: route.Generation, since: e.At}
	}
	s.queue.Add(k)
}

// parents are the route's parentRefs to the stand-in's Gateways.
func (s *standIn) parents(route *gatewayapiv1.HTTPRoute) []gatewayapiv1.ParentReference {
	var out []gatewayapiv1.ParentReference
	for _, ref := range route.Spec.ParentRefs {
		ns := route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if (ref.Group == nil || *ref.Group == gatewayapiv1.GroupName) && (ref.Kind == nil || *ref.Kind == "Gateway") &&
			s.gateways[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}] {
			out = append(out, ref)
		}
	}
	return out
}

// answered reports whether the route's status holds the stand-in's
// answer for every parent at the route's generation.
func answered(route *gatewayapiv1.HTTPRoute, parents []gatewayapiv1.ParentReference) bool {
	for _, ref := range parents {
		i := slices.IndexFunc(route.Status.Parents, func(ps gatewayapiv1.RouteParentStatus) bool {
			return ps.ControllerName == standInController && equalParentRef(ps.ParentRef, ref)
		})
		if i < 0 {
			return false
		}
		for _, t := range []gatewayapiv1.RouteConditionType{gatewayapiv1.RouteConditionAccepted, gatewayapiv1.RouteConditionResolvedRefs} {
			c := meta.FindStatusCondition(route.Status.Parents[i].Conditions, string(t))
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != route.Generation {
				return false
			}
		}
	}
	return true
}

func equalParentRef(a, b gatewayapiv1.ParentReference) bool {
	return a.Name == b.Name && equalPtr(a.Group, b.Group) && equalPtr(a.Kind, b.Kind) && equalPtr(a.Namespace, b.Namespace) &&
		equalPtr(a.SectionName, b.SectionName) && equalPtr(a.Port, b.Port)
}

func equalPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// next answers one queued route; false once the queue shut down.
func (s *standIn) next(ctx context.Context) bool {
	k, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(k)
	s.mu.Lock()
	route, w := s.routes[k], s.waiting[k]
	var parents []gatewayapiv1.ParentReference
	if route != nil {
		parents = s.parents(route)
	}
	s.mu.Unlock()
	if route == nil || answered(route, parents) {
		s.queue.Forget(k)
		return true
	}
	answer := route.DeepCopy()
	setAccepted(answer, parents)
	start := time.Now()
	err := s.c.Status().Update(ctx, answer)
	done := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.queue.Forget(k)
		s.calls = append(s.calls, done.Sub(start))
		if w.generation == route.Generation && !w.since.IsZero() {
			s.latencies = append(s.latencies, done.Sub(w.since))
		}
	case apierrors.IsConflict(err):
		// A newer version is on its way through the informer: answer that.
		s.conflicts++
		s.queue.AddRateLimited(k)
	case !apierrors.IsNotFound(err) && ctx.Err() == nil:
		framework.Logf("stand-in gateway: status of HTTPRoute %s: %v", k, err)
		s.queue.AddRateLimited(k)
	}
	return true
}

// setAccepted writes the stand-in's entry for every parent into the
// route's status, replacing its earlier ones and keeping other
// controllers'.
func setAccepted(route *gatewayapiv1.HTTPRoute, parents []gatewayapiv1.ParentReference) {
	now := metav1.Now()
	for _, ref := range parents {
		i := slices.IndexFunc(route.Status.Parents, func(ps gatewayapiv1.RouteParentStatus) bool {
			return ps.ControllerName == standInController && equalParentRef(ps.ParentRef, ref)
		})
		if i < 0 {
			route.Status.Parents = append(route.Status.Parents, gatewayapiv1.RouteParentStatus{ParentRef: ref, ControllerName: standInController})
			i = len(route.Status.Parents) - 1
		}
		for _, c := range []struct {
			typ    gatewayapiv1.RouteConditionType
			reason gatewayapiv1.RouteConditionReason
		}{
			{gatewayapiv1.RouteConditionAccepted, gatewayapiv1.RouteReasonAccepted},
			{gatewayapiv1.RouteConditionResolvedRefs, gatewayapiv1.RouteReasonResolvedRefs},
		} {
			meta.SetStatusCondition(&route.Status.Parents[i].Conditions, metav1.Condition{
				Type: string(c.typ), Status: metav1.ConditionTrue, Reason: string(c.reason), ObservedGeneration: route.Generation,
				LastTransitionTime: now, Message: "answered by the bench's stand-in for a Gateway API implementation",
			})
		}
	}
}

// standInFigures is what the stand-in did.
type standInFigures struct {
	answers, conflicts int
	// latency: first event of a route's generation until its answer was
	// written; call: the status write call alone.
	latencyMedian, latencyMax, callMedian, callMax time.Duration
}

func (s *standIn) figures() standInFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	latencies, calls := slices.Sorted(slices.Values(s.latencies)), slices.Sorted(slices.Values(s.calls))
	f := standInFigures{answers: len(calls), conflicts: s.conflicts}
	if len(latencies) > 0 {
		f.latencyMedian, f.latencyMax = framework.Percentile(latencies, 0.5), latencies[len(latencies)-1]
	}
	if len(calls) > 0 {
		f.callMedian, f.callMax = framework.Percentile(calls, 0.5), calls[len(calls)-1]
	}
	return f
}

// reset forgets the figures so far (a phase starts).
func (s *standIn) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies, s.calls, s.conflicts = nil, nil, 0
}

func (f standInFigures) String() string {
	return fmt.Sprintf("stand-in gateway controller (%d status writers): %d route statuses written (%d conflicts retried); "+
		"first event of a route until its answer was written: median %s, max %s; the write call alone: median %s, max %s",
		standInWorkers, f.answers, f.conflicts, framework.FormatMilliseconds(f.latencyMedian), framework.FormatMilliseconds(f.latencyMax),
		framework.FormatMilliseconds(f.callMedian), framework.FormatMilliseconds(f.callMax))
}
