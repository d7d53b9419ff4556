package contract

import (
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// CRD names a CustomResourceDefinition and the version Portico needs it to
// serve.
type CRD struct {
	// Name is the CRD's metadata.name, <plural>.<group>.
	Name string
	// Version must be served by the CRD.
	Version string
}

// String renders the CRD as name/version, the form used in status messages.
func (c CRD) String() string { return c.Name + "/" + c.Version }

// Every CRD a Portico controller requires or uses. These literals are the
// only place the names are written in Go outside tests.
var (
	// Portico's own APIs.
	APIGateways = CRD{Name: "apigateways.operator.portico.dev", Version: "v1alpha1"}
	APIRules    = CRD{Name: "apirules.gateway.portico.dev", Version: "v1alpha1"}
	RateLimits  = CRD{Name: "ratelimits.gateway.portico.dev", Version: "v1alpha1"}

	// Istio's APIs (istio.io/api).
	VirtualServices        = CRD{Name: "virtualservices.networking.istio.io", Version: "v1"}
	IstioGateways          = CRD{Name: "gateways.networking.istio.io", Version: "v1"}
	ServiceEntries         = CRD{Name: "serviceentries.networking.istio.io", Version: "v1"}
	WorkloadEntries        = CRD{Name: "workloadentries.networking.istio.io", Version: "v1"}
	EnvoyFilters           = CRD{Name: "envoyfilters.networking.istio.io", Version: "v1alpha3"}
	AuthorizationPolicies  = CRD{Name: "authorizationpolicies.security.istio.io", Version: "v1"}
	RequestAuthentications = CRD{Name: "requestauthentications.security.istio.io", Version: "v1"}

	// The Gateway API's (sigs.k8s.io/gateway-api, standard channel): the
	// Gateways an APIRule or a RateLimit may name, the HTTPRoutes the
	// apirule controller writes for them, and the ReferenceGrants by which
	// another namespace consents to be routed to. ReferenceGrant is read at
	// v1beta1, which every Gateway API release since v0.6 serves.
	GatewayAPIGateways = CRD{Name: "gateways.gateway.networking.k8s.io", Version: "v1"}
	HTTPRoutes         = CRD{Name: "httproutes.gateway.networking.k8s.io", Version: "v1"}
	ReferenceGrants    = CRD{Name: "referencegrants.gateway.networking.k8s.io", Version: "v1beta1"}

	// cert-manager's Certificate (the gateway's certManager source).
	Certificates = CRD{Name: "certificates.cert-manager.io", Version: "v1"}
)

// CRDState is what Portico reads of one CustomResourceDefinition.
type CRDState struct {
	// Established is true when the CRD's Established condition is True.
	Established bool
	// Terminating is true when the CRD is being deleted.
	Terminating bool
	// ServedVersions lists the versions with served: true.
	ServedVersions []string
}

// StateOf reads a CRD's state with the API server's own helpers.
func StateOf(crd *apiextensionsv1.CustomResourceDefinition) CRDState {
	state := CRDState{
		Established: apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established),
		Terminating: crd.DeletionTimestamp != nil || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating),
	}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			state.ServedVersions = append(state.ServedVersions, v.Name)
		}
	}
	return state
}

// Serves reports whether the CRD is usable for version: Established, not
// being deleted, and serving the version.
func (s CRDState) Serves(version string) bool {
	return s.Established && !s.Terminating && slices.Contains(s.ServedVersions, version)
}

// Usable reports whether crd (nil: not installed) is usable for c.
func (c CRD) Usable(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd != nil && StateOf(crd).Serves(c.Version)
}

// TransformCRD returns a cache transform that reduces a CRD to what StateOf
// and API discovery read — name, group, kind, plural, scope, versions and
// the Established and Terminating conditions — dropping the schemas, which
// dominate a CRD's size. CRDs not in watched keep only their identity, so a
// cache of every CRD in a cluster stays small.
func TransformCRD(watched []string) toolscache.TransformFunc {
	return func(in any) (any, error) {
		crd, ok := in.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return in, nil
		}
		out := &apiextensionsv1.CustomResourceDefinition{
			TypeMeta: crd.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name:              crd.Name,
				UID:               crd.UID,
				ResourceVersion:   crd.ResourceVersion,
				Generation:        crd.Generation,
				DeletionTimestamp: crd.DeletionTimestamp,
			},
		}
		if !slices.Contains(watched, crd.Name) {
			return out, nil
		}
		out.Spec.Group = crd.Spec.Group
		out.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: crd.Spec.Names.Plural, Kind: crd.Spec.Names.Kind}
		out.Spec.Scope = crd.Spec.Scope
		for _, v := range crd.Spec.Versions {
			out.Spec.Versions = append(out.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
				Name: v.Name, Served: v.Served, Storage: v.Storage,
			})
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established || c.Type == apiextensionsv1.Terminating {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
		return out, nil
	}
}
