package controller

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/internal/contract"
)

// controllerName is the controller label of the objects it writes.
var controllerName = string(contract.Gateway.Name)

// certificateExpiry is portico_gateway_certificate_expiry_timestamp_seconds,
// read from the leader's cache at scrape time: the notAfter the controller
// reports in the APIGateway's status.gateway, that of the certificate it
// checked in the Secret the gateway serves (the selfSigned one it issues,
// the one cert-manager issues, or the user's secretName). No series while
// it has none to report (no default gateway, or no valid certificate yet).
var certificateExpiry = metrics.NewCacheGauge(prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "portico_gateway_certificate_expiry_timestamp_seconds",
	Help: "When the default gateway's serving certificate expires (its notAfter), as a Unix timestamp; gateway is <namespace>/<name>.",
}, []string{"gateway"}), certificateNotAfter)

func init() {
	ctrlmetrics.Registry.MustRegister(certificateExpiry)
}

func certificateNotAfter(ctx context.Context, w *metrics.Workers, set func(float64, ...string)) error {
	gw := &operatorv1alpha1.APIGateway{}
	if err := w.Cache.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
		return client.IgnoreNotFound(err)
	}
	if st := gw.Status.Gateway; st != nil && st.NotAfter != nil && st.Gateway != "" {
		set(float64(st.NotAfter.Unix()), st.Gateway)
	}
	return nil
}

// create creates obj and counts it.
func (r *Reconciler) create(ctx context.Context, obj client.Object) error {
	if err := r.Client.Create(ctx, obj); err != nil {
		return err
	}
	r.written(obj, metrics.Create)
	return nil
}

// update updates obj and counts it.
func (r *Reconciler) update(ctx context.Context, obj client.Object) error {
	if err := r.Client.Update(ctx, obj); err != nil {
		return err
	}
	r.written(obj, metrics.Update)
	return nil
}

// delete deletes obj and counts it when it was there to delete.
func (r *Reconciler) delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := r.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	r.written(obj, metrics.Delete)
	return nil
}

func (r *Reconciler) written(obj client.Object, operation string) {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if gvk, err := r.Client.GroupVersionKindFor(obj); err == nil {
		kind = gvk.Kind
	}
	metrics.Written(controllerName, kind, operation)
}
