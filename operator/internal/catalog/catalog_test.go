package catalog

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

func TestDefaultCatalogIsValid(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Builtin.Validate()).To(Succeed())
}

func TestDefaultCatalogMatchesTheAPIEnum(t *testing.T) {
	// Every catalog entry must be a value the APIGateway CRD accepts, and the
	// other way round, or users could configure a controller that never runs.
	g := NewWithT(t)
	var names []operatorv1alpha1.ControllerName
	for _, e := range Builtin {
		names = append(names, e.Name)
	}
	g.Expect(names).To(ConsistOf(operatorv1alpha1.ControllerAPIRule, operatorv1alpha1.ControllerRateLimit, operatorv1alpha1.ControllerGateway,
		operatorv1alpha1.ControllerRateLimitService))
}

func TestRateLimitServiceEntry(t *testing.T) {
	g := NewWithT(t)
	e, ok := Builtin.Get(operatorv1alpha1.ControllerRateLimitService)
	g.Expect(ok).To(BeTrue())
	g.Expect(e.Binary()).To(Equal("portico-ratelimit-service"))
	g.Expect(e.RelatedImageEnv()).To(Equal("RELATED_IMAGE_PORTICO_RATELIMIT_SERVICE"))
	g.Expect(e.NeedsGlobalRateLimits).To(BeTrue())
	g.Expect(e.ServesWithoutLeaderElection).To(BeTrue())
	g.Expect(e.HealthPortOf()).To(BeEquivalentTo(8082))
	g.Expect(e.CRDsFor(nil)).To(ConsistOf(CRD{Name: "envoyfilters.networking.istio.io", Version: "v1alpha3"}))
	for _, other := range Builtin {
		g.Expect(other.NeedsGlobalRateLimits).To(Equal(other.Name == operatorv1alpha1.ControllerRateLimitService), other.Name)
	}
}

func TestEntryNames(t *testing.T) {
	g := NewWithT(t)
	e, ok := Builtin.Get(operatorv1alpha1.ControllerRateLimit)
	g.Expect(ok).To(BeTrue())
	g.Expect(e.Binary()).To(Equal("ratelimit-controller"))
	g.Expect(e.RelatedImageEnv()).To(Equal("RELATED_IMAGE_RATELIMIT_CONTROLLER"))
	g.Expect(e.Required[1].String()).To(Equal("envoyfilters.networking.istio.io/v1alpha3"))
}

func entry(name string, deps ...string) Entry {
	e := Entry{
		Controller:              contract.Controller{Name: operatorv1alpha1.ControllerName(name), Required: []CRD{{Name: name + "s.example.portico.dev", Version: "v1"}}},
		ProgressDeadlineSeconds: 60,
	}
	for _, d := range deps {
		e.DependsOn = append(e.DependsOn, operatorv1alpha1.ControllerName(d))
	}
	return e
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		catalog Catalog
		wantErr string // substring; empty means valid
	}{
		"independent entries": {
			catalog: Catalog{entry("a"), entry("b")},
		},
		"diamond of dependencies": {
			catalog: Catalog{entry("d", "b", "c"), entry("b", "a"), entry("c", "a"), entry("a")},
		},
		"self dependency": {
			catalog: Catalog{entry("a", "a")},
			wantErr: "dependency cycle: a -> a",
		},
		"three-step cycle": {
			catalog: Catalog{entry("a", "b"), entry("b", "c"), entry("c", "a")},
			wantErr: "dependency cycle: a -> b -> c -> a",
		},
		"unknown dependency": {
			catalog: Catalog{entry("a", "missing")},
			wantErr: `depends on unknown controller "missing"`,
		},
		"duplicate controller": {
			catalog: Catalog{entry("a"), entry("a")},
			wantErr: "listed twice",
		},
		"bad controller name": {
			catalog: Catalog{entry("Bad-Name")},
			wantErr: "lower-case alphanumeric",
		},
		"no required CRD": {
			catalog: Catalog{{Controller: contract.Controller{Name: "a"}, ProgressDeadlineSeconds: 1}},
			wantErr: "requires no CRD",
		},
		"CRD name without group": {
			catalog: Catalog{{Controller: contract.Controller{Name: "a", Required: []CRD{{Name: "things", Version: "v1"}}}, ProgressDeadlineSeconds: 1}},
			wantErr: "is not <plural>.<group>",
		},
		"bad CRD version": {
			catalog: Catalog{{Controller: contract.Controller{Name: "a", Required: []CRD{{Name: "things.example.dev", Version: "1.0"}}}, ProgressDeadlineSeconds: 1}},
			wantErr: "is not a Kubernetes API version",
		},
		"CRD required twice": {
			catalog: Catalog{{Controller: contract.Controller{Name: "a", Required: []CRD{{Name: "things.example.dev", Version: "v1"}, {Name: "things.example.dev", Version: "v2"}}}, ProgressDeadlineSeconds: 1}},
			wantErr: "required twice",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.catalog.Validate()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestOrderedPutsDependenciesFirst(t *testing.T) {
	g := NewWithT(t)
	ordered, err := Catalog{entry("d", "b", "c"), entry("b", "a"), entry("c", "a"), entry("a")}.Ordered()
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range ordered {
		names = append(names, string(e.Name))
	}
	g.Expect(names).To(Equal([]string{"a", "b", "c", "d"}))
}

func TestCRDNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Builtin.CRDNames()).To(Equal([]string{
		"apigateways.operator.portico.dev",
		"apirules.gateway.portico.dev",
		"authorizationpolicies.security.istio.io",
		"certificates.cert-manager.io", // only for spec.gateway.certificate.certManager, but always watched
		"envoyfilters.networking.istio.io",
		"gateways.gateway.networking.k8s.io", // only for spec.gateway.gatewayAPI
		"gateways.networking.istio.io",
		"httproutes.gateway.networking.k8s.io", // only for spec.gateway.gatewayAPI
		"ratelimits.gateway.portico.dev",
		"requestauthentications.security.istio.io",
		"virtualservices.networking.istio.io",
	}))
}

func TestSpecCRDsDependOnTheSpec(t *testing.T) {
	g := NewWithT(t)
	e, ok := Builtin.Get(operatorv1alpha1.ControllerGateway)
	g.Expect(ok).To(BeTrue())
	names := func(spec *operatorv1alpha1.APIGatewaySpec) []string {
		var out []string
		for _, c := range e.CRDsFor(spec) {
			out = append(out, c.String())
		}
		return out
	}
	always := []string{"apigateways.operator.portico.dev/v1alpha1", "gateways.networking.istio.io/v1", "virtualservices.networking.istio.io/v1"}
	certManager := &operatorv1alpha1.GatewayCertificate{CertManager: &operatorv1alpha1.CertManagerCertificate{IssuerRef: operatorv1alpha1.IssuerReference{Name: "le"}}}
	off := false
	for _, tc := range []struct {
		name string
		spec *operatorv1alpha1.APIGatewaySpec
		want []string
	}{
		{"defaults", nil, always},
		{"no gateway", &operatorv1alpha1.APIGatewaySpec{}, always},
		{"selfSigned", &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com"}}, always},
		{"certManager", &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com", Certificate: certManager}},
			append(slices.Clone(always), "certificates.cert-manager.io/v1")},
		{"certManager but disabled", &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Enabled: &off, Domain: "example.com", Certificate: certManager}}, always},
		{"gatewayAPI", &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{}}},
			append(slices.Clone(always), "gateways.gateway.networking.k8s.io/v1", "httproutes.gateway.networking.k8s.io/v1")},
		{"gatewayAPI but disabled", &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Enabled: &off, Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{}}}, always},
	} {
		g.Expect(names(tc.spec)).To(Equal(tc.want), tc.name)
	}
	g.Expect(e.SpecReason(contract.Certificates)).To(ContainSubstring("certManager"))
	g.Expect(e.SpecReason(contract.HTTPRoutes)).To(ContainSubstring("gatewayAPI"))
	g.Expect(e.SpecReason(contract.IstioGateways)).To(BeEmpty())
}

func TestWithProgressDeadline(t *testing.T) {
	g := NewWithT(t)
	short := Builtin.WithProgressDeadline(1500 * time.Millisecond)
	g.Expect(short[0].ProgressDeadlineSeconds).To(BeEquivalentTo(2))
	g.Expect(Builtin[0].ProgressDeadlineSeconds).To(BeEquivalentTo(600), "the built-in catalog is not modified")
	g.Expect(Builtin.WithProgressDeadline(0)[0].ProgressDeadlineSeconds).To(BeEquivalentTo(600))
}
