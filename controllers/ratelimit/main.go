// Command ratelimit-controller computes one EnvoyFilter per gateway workload
// (of an Istio Gateway, or of a Gateway API Gateway that Istio runs) and
// RateLimit namespace from the RateLimits that reach it. The
// Portico operator runs it while the CRDs it needs are installed
// (contract.RateLimit). Without an optional CRD the targets of that kind
// cannot be resolved and RateLimits naming them report TargetNotFound.
// contract.EnvIstioRootNamespace overrides Istio's root namespace. With
// --global-ratelimit (the operator passes it while the administrator
// enables global rate limits) it also writes the configuration of Portico's
// rate-limit service, in the namespace it runs in.
package main

import (
	"context"
	"os"
	"time"

	"github.com/spf13/pflag"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	runner.Main(command())
}

// command is the controller's runner configuration with its own flags.
func command() runner.Controller {
	global := controller.Global{Namespace: os.Getenv(contract.EnvPodNamespace)}
	return runner.Controller{
		Contract: contract.RateLimit,
		Short:    "Enforces RateLimits with one EnvoyFilter per Istio gateway workload and namespace",
		AddToScheme: []func(*runtime.Scheme) error{
			clientgoscheme.AddToScheme, gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, gatewayapiv1.Install,
		},
		Flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&global.Enabled, contract.FlagGlobalRateLimit, false,
				"write global rate limits: the filters that call Portico's rate-limit service and its configuration (in $"+contract.EnvPodNamespace+")")
			fs.BoolVar(&global.FailOpen, contract.FlagGlobalRateLimitFailOpen, true, "gateways serve requests when the rate-limit service cannot answer")
			fs.DurationVar(&global.Timeout, contract.FlagGlobalRateLimitTimeout, 100*time.Millisecond, "how long gateways wait for the rate-limit service's decision")
		},
		// Every custom resource kind it watches: the guard's decode is the
		// only one (quarantine.Handoff; issue 45: decoding was a third of
		// the controller's CPU at 10,000 APIRules, half of it the
		// client's). ConfigMaps and Secrets come as protobuf, which the
		// guard passes untouched.
		HandOff: []client.Object{
			&gatewayv1alpha1.RateLimit{}, &networkingv1alpha3.EnvoyFilter{}, &networkingv1.Gateway{}, &gatewayapiv1.Gateway{},
			&gatewayv1alpha1.APIRule{},
		},
		Cache: func(opts *cache.Options, env runner.Environment) {
			controller.ConfigureCache(opts, env.HasOptional(contract.APIRules))
			if global.Enabled {
				controller.ConfigureGlobalCache(opts, global.Namespace)
			}
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
				Global:                  global,
			}
			return r.SetupWithManager(mgr)
		},
	}
}
