// Command ratelimit-controller computes one EnvoyFilter per gateway workload
// (of an Istio Gateway, or of a Gateway API Gateway that Istio runs) and
// RateLimit namespace from the RateLimits that reach it. The
// Portico operator runs it while the CRDs it needs are installed
// (contract.RateLimit). Without an optional CRD the targets of that kind
// cannot be resolved and RateLimits naming them report TargetNotFound.
// contract.EnvIstioRootNamespace overrides Istio's root namespace.
package main

import (
	"context"
	"os"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/runner"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/controller"
	"github.com/portico-dev/portico/internal/contract"
)

func main() {
	runner.Main(runner.Controller{
		Contract: contract.RateLimit,
		Short:    "Enforces RateLimits with one EnvoyFilter per Istio gateway workload and namespace",
		AddToScheme: []func(*runtime.Scheme) error{
			gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, gatewayapiv1.Install,
		},
		Cache: func(opts *cache.Options, env runner.Environment) {
			controller.ConfigureCache(opts, env.HasOptional(contract.APIRules))
		},
		Retire: func(ctx context.Context, c client.Client) error {
			return controller.Retire(ctx, c, os.Getenv(contract.EnvIstioRootNamespace))
		},
		Setup: func(mgr ctrl.Manager, env runner.Environment) error {
			r := &controller.Reconciler{
				Client:                  mgr.GetClient(),
				GatewaysKnown:           env.HasOptional(contract.IstioGateways),
				GatewayAPIGatewaysKnown: env.HasOptional(contract.GatewayAPIGateways),
				APIRulesKnown:           env.HasOptional(contract.APIRules),
				RootNamespace:           os.Getenv(contract.EnvIstioRootNamespace),
			}
			return r.SetupWithManager(mgr)
		},
	})
}
