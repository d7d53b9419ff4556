package controller

import (
	"github.com/portico-dev/portico/controllers/internal/runner"
	"github.com/portico-dev/portico/internal/contract"
)

// Installed is which of the controller's optional CRDs were established
// when it started (the operator restarts it when that changes), so what it
// can watch, check and write. Each field is one CRD or pair, named by it;
// the mode an APIRule is rendered in is the plan's, not these.
type Installed struct {
	// IstioGateways: the Istio Gateway an APIRule names (or the default
	// gateway) is checked to exist.
	IstioGateways bool
	// ServiceEntries: backends whose host a ServiceEntry also declares
	// are refused.
	ServiceEntries bool
	// WorkloadEntries: backends whose selector picks WorkloadEntries are
	// refused.
	WorkloadEntries bool
	// APIGateways: the APIGateway is read, for its wildcard host grants,
	// its default gateway and its granted authorizers (without it no
	// wildcard is granted and there is no default gateway).
	APIGateways bool
	// HTTPRoutes: the Gateway API's HTTPRoute and ReferenceGrant CRDs, so
	// HTTPRoute mode. Without them an APIRule naming a Gateway API Gateway
	// waits (reason GatewayAPINotInstalled).
	HTTPRoutes bool
	// GatewayAPIGateways: the Gateway API Gateway an APIRule names is
	// checked to exist.
	GatewayAPIGateways bool
}

// InstalledIn reads Installed from the environment the runner found.
func InstalledIn(env runner.Environment) Installed {
	return Installed{
		IstioGateways:      env.HasOptional(contract.IstioGateways),
		ServiceEntries:     env.HasOptional(contract.ServiceEntries),
		WorkloadEntries:    env.HasOptional(contract.WorkloadEntries),
		APIGateways:        env.HasOptional(contract.APIGateways),
		HTTPRoutes:         env.HasOptional(contract.HTTPRoutes) && env.HasOptional(contract.ReferenceGrants),
		GatewayAPIGateways: env.HasOptional(contract.GatewayAPIGateways),
	}
}

// AllInstalled is every optional CRD installed (tests, benchmarks).
func AllInstalled() Installed {
	return Installed{IstioGateways: true, ServiceEntries: true, WorkloadEntries: true, APIGateways: true, HTTPRoutes: true, GatewayAPIGateways: true}
}
