// Command ratelimit-controller computes one EnvoyFilter per Istio gateway
// workload and RateLimit namespace from the RateLimits that reach it. The
// Portico operator runs it while the CRDs it needs are installed.
package main

import (
	"os"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/controller"
	controllerruntime "github.com/portico-dev/portico/controllers/runtime"
)

// Optional CRDs: without them the targets of that kind cannot be resolved
// and RateLimits naming them report TargetNotFound.
var (
	istioGateways = controllerruntime.CRD{Name: "gateways.networking.istio.io", Version: "v1"}
	apiRules      = controllerruntime.CRD{Name: "apirules.gateway.portico.dev", Version: "v1alpha1"}
)

// rootNamespaceEnv overrides Istio's root namespace (meshConfig.rootNamespace,
// istio-system by default), where an EnvoyFilter reaches the matching pods of
// every namespace; set it with spec.controllers[].env of the APIGateway.
const rootNamespaceEnv = "ISTIO_ROOT_NAMESPACE"

func main() {
	controllerruntime.Main(controllerruntime.Controller{
		Name:  "ratelimit",
		Short: "Enforces RateLimits with one EnvoyFilter per Istio gateway workload and namespace",
		RequiredCRDs: []controllerruntime.CRD{
			{Name: "ratelimits.gateway.portico.dev", Version: "v1alpha1"},
			{Name: "envoyfilters.networking.istio.io", Version: "v1alpha3"},
		},
		OptionalCRDs: []controllerruntime.CRD{istioGateways, apiRules},
		AddToScheme: []func(*runtime.Scheme) error{
			gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme,
		},
		Cache:  func(opts *cache.Options, _ controllerruntime.Environment) { controller.ConfigureCache(opts) },
		Retire: controller.Retire,
		Setup: func(mgr ctrl.Manager, env controllerruntime.Environment) error {
			r := &controller.Reconciler{
				Client:        mgr.GetClient(),
				GatewaysKnown: env.HasOptional(istioGateways),
				APIRulesKnown: env.HasOptional(apiRules),
				RootNamespace: os.Getenv(rootNamespaceEnv),
			}
			return r.SetupWithManager(mgr)
		},
	})
}
