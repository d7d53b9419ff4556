// Package backoff is how a Portico controller retries after failures, so
// that an API server outage leaves nothing waiting long after the API
// server is back (issue 40: no APIRule or RateLimit waits more than 30 s
// once it is healthy again). Two delays grow during an outage, and each is
// bounded here; every manager of the controllers and the operator uses
// both.
//
// Limiter is the rate limiter of every controller's work queue (the
// apirule, ratelimit and gateway controllers' fair queues, the operator's
// queue): a failed reconcile is retried after Base × 2^(failures so far),
// never more than Max; a reconcile that succeeds (or asks for a later
// look, RequeueAfter) forgets the item's failures. controller-runtime's
// default lets the delay double up to 1000 s: an item failing from the
// start of an outage retries 20.5 s, 41 s, 82 s into it, so after a 45 s
// outage it waits 37 s more, and as long again if that retry meets a
// conflict, since its failures were never forgotten. With Max the next
// retry comes within Max of the API server's return. There is no token
// bucket shared by the items (client-go's DefaultControllerRateLimiter
// adds one, 10 qps, burst 100, when the priority queue is off): every
// failure reserves a token, so hundreds of items failing through an outage
// would push every retry minutes past it.
//
// NewInformer is the informer constructor of every manager's cache:
// client-go's reflector backs off its own reconnections from 0.8 s to 30 s
// with as much jitter again, so an informer may watch again up to a minute
// after the API server is back; until then the cache misses the writes the
// outage cut off (the controller's own among them), and every retry based
// on it fails on a conflict, however soon it comes. NewInformer retries an
// unreachable API server itself, every ReconnectMax, so the cache is
// current within a second of its return.
//
// Both were needed, as the chaos test (test/chaos) measured after a 40 s
// outage with 100 APIRules converging: with neither, the slowest APIRule
// was Ready 52 s after the API server's return; with Limiter alone, 43 s
// (its retries every 10 s each met a conflict until its informer
// reconnected); with both, 7 s.
//
// The cost of the cap is bounded: a controller returns an error only for
// what a retry may fix (an API call that failed, a write that met a
// conflict); what the user must fix is a condition on the object, not an
// error, and is not retried. An item that keeps failing is retried every
// Max at most, and the process's client-side limit (--kube-api-qps) and
// the API server's priority and fairness bound what all retries together
// send; an informer's reconnection is one connection attempt a second.
package backoff

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

const (
	// Base is the delay after an item's first failure.
	Base = 5 * time.Millisecond
	// Max is the longest delay between an item's retries: well within the
	// 30 s a controller may take to converge an object once the API server
	// is healthy again (a retry within Max, and a conflict met by it
	// retried within Max again).
	Max = 10 * time.Second
)

// Limiter returns a new rate limiter for a controller's work queue:
// per-item exponential from Base, capped at Max, reset by Forget.
func Limiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[T](Base, Max)
}
