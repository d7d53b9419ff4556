package contract

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func TestControllerNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(APIRule.Binary()).To(Equal("apirule-controller"))
	g.Expect(RateLimit.RelatedImageEnv()).To(Equal("RELATED_IMAGE_RATELIMIT_CONTROLLER"))
	g.Expect(Gateway.LeaderElectionID()).To(Equal("gateway-controller.gateway.portico.dev"))
	c, ok := ControllerNamed("ratelimit")
	g.Expect(ok).To(BeTrue())
	g.Expect(c.Binary()).To(Equal("ratelimit-controller"))
	_, ok = ControllerNamed("nope")
	g.Expect(ok).To(BeFalse())
	g.Expect(Flag(FlagLogLevel, "debug")).To(Equal("--log-level=debug"))

	g.Expect(RateLimitService.Binary()).To(Equal("portico-ratelimit-service"))
	g.Expect(RateLimitService.RelatedImageEnv()).To(Equal("RELATED_IMAGE_PORTICO_RATELIMIT_SERVICE"))
	g.Expect(RateLimitService.HealthPortOf()).To(BeEquivalentTo(RateLimitServiceHealthPort))
	g.Expect(RateLimit.HealthPortOf()).To(BeEquivalentTo(HealthPort))
}

// The flags the operator sets from spec.rateLimits.global are declared by
// their binaries and may not be overridden through extraArgs.
func TestGlobalRateLimitFlags(t *testing.T) {
	g := NewWithT(t)
	for c, flags := range map[string][]string{
		RateLimit.Binary():        {FlagGlobalRateLimit, FlagGlobalRateLimitFailOpen, FlagGlobalRateLimitTimeout},
		RateLimitService.Binary(): {FlagGRPCAddress, FlagRedisConfigDir, FlagRedisTLS, FlagMaxKeysPerRule, FlagLeaderElect},
	} {
		named := map[string]Controller{RateLimit.Binary(): RateLimit, RateLimitService.Binary(): RateLimitService}[c]
		for _, f := range flags {
			g.Expect(named.Flags).To(ContainElement(f), "%s declares --%s", c, f)
			g.Expect(named.Reserved()).To(ContainElement(f), "--%s is the operator's", f)
		}
	}
	g.Expect(APIRule.Flags).NotTo(ContainElement(FlagGlobalRateLimit))
	g.Expect(APIRule.Reserved()).To(Equal(ReservedFlags))
}

// Every controller of the contract has its main package (controllers/<name>,
// whose main.go every binary but the rate-limit service has here: its
// branch brings it, this tree has its RBAC markers), requires its own API,
// and names each CRD once in a well-formed way.
func TestControllersAreWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9-]+(\.[a-z0-9-]+){2,}$`)
	version := regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	for _, c := range Controllers {
		t.Run(string(c.Name), func(t *testing.T) {
			g := NewWithT(t)
			sources, err := filepath.Glob(filepath.Join("..", "..", "controllers", string(c.Name), "*.go"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sources).NotTo(BeEmpty(), "controllers/%s is the binary's package", c.Name)
			if c.Name != RateLimitService.Name {
				_, err := os.Stat(filepath.Join("..", "..", "controllers", string(c.Name), "main.go"))
				g.Expect(err).NotTo(HaveOccurred(), "controllers/%s/main.go", c.Name)
			}
			g.Expect(c.Required).NotTo(BeEmpty())
			seen := map[string]bool{}
			for _, crd := range append(append([]CRD{}, c.Required...), c.Optional...) {
				g.Expect(crd.Name).To(MatchRegexp(name.String()))
				g.Expect(crd.Version).To(MatchRegexp(version.String()))
				g.Expect(seen).NotTo(HaveKey(crd.Name), "%s listed twice", crd.Name)
				seen[crd.Name] = true
			}
		})
	}
	mains, err := filepath.Glob(filepath.Join("..", "..", "controllers", "*", "main.go"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, main := range mains {
		_, ok := ControllerNamed(operatorv1alpha1.ControllerName(filepath.Base(filepath.Dir(main))))
		NewWithT(t).Expect(ok).To(BeTrue(), "every controller binary is in the contract: %s", main)
	}
}

// The build stamps the version through VersionVariable; a moved package
// would silently leave every binary at the default.
func TestVersionVariableNamesThisPackage(t *testing.T) {
	NewWithT(t).Expect(VersionVariable).To(Equal(reflect.TypeOf(CRD{}).PkgPath() + ".version"))
}
