package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/portico-dev/portico/internal/backoff"
)

// Options completes a controller's options (controller.Options, as given
// to the builder's WithOptions) with Portico's work queue: the fair queue
// by namespace (ByNamespace) and the retries of package backoff, which
// cap an item's delay at backoff.Max, where controller-runtime's default
// lets it grow to 1000 s (issue 40: an API server outage must not leave an
// object waiting long after the API server is back). Every controller's
// setup goes through it.
func Options(o controller.Options) controller.Options {
	o.NewQueue = ByNamespace
	o.RateLimiter = backoff.Limiter[reconcile.Request]()
	return o
}

// ByNamespace is a controller's NewQueue option (controller.Options): a
// fair queue whose tenants are the requests' namespaces. Requests of
// cluster-scoped objects share the tenant "". rateLimiter is the
// controller's Options.RateLimiter, which controller-runtime defaults to
// its own (up to 1000 s per item): use Options, which sets Portico's.
func ByNamespace(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return New(name, func(r reconcile.Request) string { return r.Namespace }, rateLimiter)
}
