// Command gateway-controller runs the default gateway of the APIGateway
// (spec.gateway): an Istio Gateway for *.<domain> with its TLS certificate
// and a health VirtualService. The Portico operator runs it while the CRDs
// it needs are installed (contract.Gateway). Of the optional CRDs,
// cert-manager's Certificate serves the certManager source, and APIRules
// keep a disabled gateway until none uses it; with the Gateway API's
// Gateway and HTTPRoute CRDs, spec.gateway.gatewayAPI makes the default
// gateway a Gateway API Gateway with an HTTP-to-HTTPS redirect route.
package main

import (
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/gateway/internal/controller"
	"github.com/portico-dev/portico/controllers/internal/runner"
	"github.com/portico-dev/portico/internal/contract"
)

func main() {
	runner.Main(runner.Controller{
		Contract: contract.Gateway,
		Short:    "Runs the default gateway: an Istio Gateway for *.<domain> with its TLS certificate",
		AddToScheme: []func(*runtime.Scheme) error{
			porticov1alpha1.AddToScheme, networkingv1.AddToScheme, cmv1.AddToScheme, gwapiv1.Install,
		},
		Cache: func(opts *cache.Options, env runner.Environment) {
			controller.ConfigureCache(opts, env.HasOptional(contract.Certificates), gatewayAPI(env))
		},
		Setup: func(mgr ctrl.Manager, env runner.Environment) error {
			r := &controller.Reconciler{
				Client:      mgr.GetClient(),
				Reader:      mgr.GetAPIReader(),
				Clock:       clock.RealClock{},
				CertManager: env.HasOptional(contract.Certificates),
				APIRules:    env.HasOptional(contract.APIRules),
				GatewayAPI:  gatewayAPI(env),
			}
			return r.SetupWithManager(mgr)
		},
	})
}

// gatewayAPI reports whether the default gateway may be a Gateway API
// Gateway: its Gateway and HTTPRoute CRDs are there.
func gatewayAPI(env runner.Environment) bool {
	return env.HasOptional(contract.GatewayAPIGateways) && env.HasOptional(contract.HTTPRoutes)
}
