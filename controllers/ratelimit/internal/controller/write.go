package controller

import (
	"context"
	"fmt"

	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/controllers/internal/kinds"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/internal/owned"
)

// written is every kind the controller writes: the EnvoyFilters and the
// rate-limit service's ConfigMaps (the key Secret has its own create-only
// write: its data is never rewritten).
var written = owned.Table{kinds.EnvoyFilters, kinds.ConfigMaps}

// writer is the controller's write path (package owned): server-side
// applies, as the controller always wrote, each of a whole desired object,
// counted as creates, updates and deletes.
func (r *Reconciler) writer() *owned.Writer {
	r.writerOnce.Do(func() {
		r.objects = &owned.Writer{
			Client: r.Client, Reader: r.Reader, Kinds: written, FieldOwner: FieldManager, Apply: true,
			Written: func(_ client.Object, kind, operation string) { metrics.Written(controllerName, kind, operation) },
		}
	})
	return r.objects
}

// ownsFilter proves an EnvoyFilter the controller's (Written).
func (r *Reconciler) ownsFilter(obj client.Object) bool { return Written(obj, r.rootNamespace()) }

// ownsConfig proves a ConfigMap the controller's feed of the rate-limit
// service: in Portico's namespace, which tenants cannot write, with the
// controller's labels.
func (r *Reconciler) ownsConfig(obj client.Object) bool {
	return obj.GetNamespace() == r.Global.Namespace && obj.GetLabels()[globallimit.LabelManagedBy] == globallimit.ManagedBy
}

// apply writes an EnvoyFilter unless the live one already matches. It never
// overwrites an EnvoyFilter of the same name that it does not manage.
func (r *Reconciler) apply(ctx context.Context, desired, live *networkingv1alpha3.EnvoyFilter) error {
	return write(ctx, r, r.ownsFilter, desired, live)
}

// writeConfig writes a feed ConfigMap unless the live one already holds
// its data.
func (r *Reconciler) writeConfig(ctx context.Context, desired, live *corev1.ConfigMap) error {
	return write(ctx, r, r.ownsConfig, desired, live)
}

// write writes desired over live (nil: none seen), unless another's
// object holds the name (errForeign).
func write[T client.Object](ctx context.Context, r *Reconciler, owns owned.Owns, desired, live T) error {
	var l client.Object
	if any(live) != any(*new(T)) {
		l = live
	}
	_, conflict, err := r.writer().Write(ctx, owns, desired, l)
	if conflict != "" {
		return fmt.Errorf("%s but is not managed by the ratelimit controller (it did not write it): %w, it is left untouched", conflict, errForeign)
	}
	return err
}

// deleteFilters deletes the live EnvoyFilters no policy needs any more.
func (r *Reconciler) deleteFilters(ctx context.Context, live map[string]*networkingv1alpha3.EnvoyFilter, wanted map[string]bool) error {
	_, err := r.writer().Delete(ctx, r.ownsFilter, unwanted(live, wanted), nil)
	return err
}

// deleteGlobalConfigs removes the feed ConfigMaps no namespace needs any
// more: a namespace without enforced global rules has no limits in the
// service.
func (r *Reconciler) deleteGlobalConfigs(ctx context.Context, live map[string]*corev1.ConfigMap, wanted map[string]bool) error {
	_, err := r.writer().Delete(ctx, r.ownsConfig, unwanted(live, wanted), nil)
	return err
}

// unwanted are the live objects whose keys wanted lacks.
func unwanted[T client.Object](live map[string]T, wanted map[string]bool) []client.Object {
	var out []client.Object
	for key, obj := range live {
		if !wanted[key] {
			out = append(out, obj)
		}
	}
	return out
}
