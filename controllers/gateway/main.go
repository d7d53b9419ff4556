// Command gateway-controller runs the default gateway of the APIGateway
// (spec.gateway): an Istio Gateway for *.<domain> with its TLS certificate
// and a health VirtualService. The Portico operator runs it while the CRDs
// it needs are installed.
package main

import (
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/gateway/internal/controller"
	controllerruntime "github.com/portico-dev/portico/controllers/runtime"
)

// Optional CRDs: cert-manager's Certificate for the certManager source, and
// APIRules, which keep a disabled gateway until none uses it.
var (
	certificates = controllerruntime.CRD{Name: "certificates.cert-manager.io", Version: "v1"}
	apiRules     = controllerruntime.CRD{Name: "apirules.gateway.portico.dev", Version: "v1alpha1"}
)

func main() {
	controllerruntime.Main(controllerruntime.Controller{
		Name:  "gateway",
		Short: "Runs the default gateway: an Istio Gateway for *.<domain> with its TLS certificate",
		RequiredCRDs: []controllerruntime.CRD{
			{Name: "apigateways.operator.portico.dev", Version: "v1alpha1"},
			{Name: "gateways.networking.istio.io", Version: "v1"},
			{Name: "virtualservices.networking.istio.io", Version: "v1"},
		},
		OptionalCRDs: []controllerruntime.CRD{certificates, apiRules},
		AddToScheme: []func(*runtime.Scheme) error{
			gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, cmv1.AddToScheme,
		},
		Cache: func(opts *cache.Options, env controllerruntime.Environment) {
			controller.ConfigureCache(opts, env.HasOptional(certificates))
		},
		Setup: func(mgr ctrl.Manager, env controllerruntime.Environment) error {
			r := &controller.Reconciler{
				Client:      mgr.GetClient(),
				Reader:      mgr.GetAPIReader(),
				Clock:       clock.RealClock{},
				CertManager: env.HasOptional(certificates),
				APIRules:    env.HasOptional(apiRules),
			}
			return r.SetupWithManager(mgr)
		},
	})
}
