package backoff

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

const (
	// reconnectFirst and ReconnectMax are the pauses between an informer's
	// attempts to reach an API server that cannot be reached: from
	// reconnectFirst, doubling, never more than ReconnectMax.
	reconnectFirst = 100 * time.Millisecond
	// ReconnectMax is the longest an informer takes to list and watch again
	// once the API server answers.
	ReconnectMax = time.Second
)

// NewInformer is the cache's informer constructor (cache.Options
// NewInformer) of every Portico manager: client-go's shared index
// informer, as controller-runtime's default, whose lists and watches are
// retried here, every ReconnectMax at most, while the API server cannot be
// reached (connection refused or reset, 503).
//
// Why (issue 40): client-go's reflector backs off its own attempts from
// 0.8 s up to 30 s, with as much jitter again, so after an outage of a
// minute an informer watches again up to a minute after the API server is
// back. Until it does, the cache misses every change made meanwhile,
// including the controller's own writes whose answers the outage cut off:
// each write based on the cached version then fails on a conflict ("the
// object has been modified"), however soon it is retried. Retrying the
// connection here hands the reflector an answer, never an error, for an
// outage, so its backoff never grows and the cache is current within
// ReconnectMax of the API server's return. Other errors (forbidden, gone,
// throttled) reach the reflector as before.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(Reconnecting(lw), obj, resync, indexers)
}

// Reconnecting wraps a ListerWatcher so that a list or watch that cannot
// reach the API server is tried again, every ReconnectMax at most, until it
// does or its context ends.
func Reconnecting(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return untilReachable(ctx, func() (runtime.Object, error) { return inner.ListWithContext(ctx, opts) })
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return untilReachable(ctx, func() (watch.Interface, error) { return inner.WatchWithContext(ctx, opts) })
		},
	}
}

// untilReachable calls call until it returns anything but Unreachable, or
// ctx ends (then it returns the last error).
func untilReachable[T any](ctx context.Context, call func() (T, error)) (T, error) {
	pause := reconnectFirst
	for {
		out, err := call()
		if err == nil || !Unreachable(err) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(pause):
		}
		pause = min(2*pause, ReconnectMax)
	}
}

// Unreachable reports whether err says that the API server could not be
// reached, or is not serving yet: connection refused or reset, 503.
func Unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || apierrors.IsServiceUnavailable(err)
}
