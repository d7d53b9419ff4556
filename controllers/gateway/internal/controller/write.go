package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/controllers/internal/kinds"
	"github.com/portico-dev/portico/internal/owned"
)

// written is every kind the controller creates and updates through its
// write path (Secrets, ConfigMaps and the Certificate have their own
// writes: a Secret's type is immutable, and their data is renewed).
var written = owned.Table{kinds.IstioGateways, kinds.VirtualServices, kinds.GatewayAPIGateways, kinds.HTTPRoutes}

// writer is the controller's write path (package owned), counting its
// writes as create, update and delete do.
func (r *Reconciler) writer() *owned.Writer {
	return &owned.Writer{Client: r.Client, Reader: r.Reader, Kinds: written,
		Written: func(obj client.Object, _, operation string) { r.written(obj, operation) }}
}
