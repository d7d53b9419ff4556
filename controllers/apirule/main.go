// Command apirule-controller turns APIRules into Istio VirtualServices,
// AuthorizationPolicies and RequestAuthentications. The Portico operator
// runs it while the CRDs it needs are installed (contract.APIRule). Of the
// optional CRDs: with Istio's Gateway an APIRule naming a missing Gateway is
// reported instead of applied; with ServiceEntries or WorkloadEntries a
// backend they would divert is refused; the APIGateway holds the wildcard
// host grants and the default gateway; with the Gateway API's HTTPRoute and
// ReferenceGrant CRDs, APIRules naming a Gateway API Gateway become
// HTTPRoutes (HTTPRoute mode).
package main

import (
	"context"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/controller"
	"github.com/portico-dev/portico/controllers/internal/runner"
	"github.com/portico-dev/portico/internal/contract"
)

func main() {
	runner.Main(runner.Controller{
		Contract: contract.APIRule,
		Short:    "Exposes Services through Istio according to APIRules",
		Cache: func(opts *cache.Options, env runner.Environment) {
			controller.ConfigureCache(opts, controller.InstalledIn(env))
		},
		SlimWatched: controller.SlimWatched,
		HandOff:     controller.HandOff,
		AddToScheme: []func(*runtime.Scheme) error{
			porticov1alpha1.AddToScheme, networkingv1.AddToScheme, securityv1.AddToScheme, discoveryv1.AddToScheme,
			gwapiv1.Install, gwapiv1beta1.Install,
		},
		Setup: func(mgr ctrl.Manager, env runner.Environment) error {
			r := &controller.Reconciler{
				Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(controller.FieldManager), Installed: controller.InstalledIn(env),
			}
			return r.SetupWithManager(context.Background(), mgr)
		},
		// Disabled or removed: APIRules must stay deletable.
		Retire: controller.Retire,
	})
}
