package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ByNamespace is a controller's NewQueue option (controller.Options): a
// fair queue whose tenants are the requests' namespaces. Requests of
// cluster-scoped objects share the tenant "".
func ByNamespace(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return New(name, func(r reconcile.Request) string { return r.Namespace }, rateLimiter)
}
