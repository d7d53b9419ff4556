// Command apirule-controller turns APIRules into Istio VirtualServices,
// AuthorizationPolicies and RequestAuthentications. The Portico operator
// runs it while the CRDs it needs are installed.
package main

import (
	"context"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/controller"
	controllerruntime "github.com/portico-dev/portico/controllers/runtime"
)

// istioGateways is optional: when installed, APIRules naming a missing
// Gateway are reported instead of applied.
var istioGateways = controllerruntime.CRD{Name: "gateways.networking.istio.io", Version: "v1"}

// serviceEntries is optional: when installed, a backend whose host a
// ServiceEntry also declares is refused, as traffic to it may land elsewhere.
var serviceEntries = controllerruntime.CRD{Name: "serviceentries.networking.istio.io", Version: "v1"}

// workloadEntries is optional: when installed, a backend whose selector
// picks WorkloadEntries (addresses that are not pods) is refused.
var workloadEntries = controllerruntime.CRD{Name: "workloadentries.networking.istio.io", Version: "v1"}

// apiGateways is optional: the APIGateway holds the administrator's
// wildcard host grants; without it no wildcard host is granted.
var apiGateways = controllerruntime.CRD{Name: "apigateways.operator.portico.dev", Version: "v1alpha1"}

func main() {
	controllerruntime.Main(controllerruntime.Controller{
		Name:  "apirule",
		Short: "Exposes Services through Istio according to APIRules",
		RequiredCRDs: []controllerruntime.CRD{
			{Name: "apirules.gateway.portico.dev", Version: "v1alpha1"},
			{Name: "virtualservices.networking.istio.io", Version: "v1"},
			{Name: "authorizationpolicies.security.istio.io", Version: "v1"},
			{Name: "requestauthentications.security.istio.io", Version: "v1"},
		},
		OptionalCRDs: []controllerruntime.CRD{istioGateways, serviceEntries, workloadEntries, apiGateways},
		Cache: func(opts *cache.Options, env controllerruntime.Environment) {
			controller.ConfigureCache(opts, env.HasOptional(serviceEntries), env.HasOptional(workloadEntries))
		},
		AddToScheme: []func(*runtime.Scheme) error{
			gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, securityv1.AddToScheme, discoveryv1.AddToScheme,
		},
		Setup: func(mgr ctrl.Manager, env controllerruntime.Environment) error {
			r := &controller.Reconciler{
				Client: mgr.GetClient(), CheckGateways: env.HasOptional(istioGateways), CheckServiceEntries: env.HasOptional(serviceEntries),
				CheckWorkloadEntries: env.HasOptional(workloadEntries), ReadGrants: env.HasOptional(apiGateways),
			}
			return r.SetupWithManager(context.Background(), mgr)
		},
	})
}
