package contract

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
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
}

// Every controller of the contract has its main package, requires its own
// API, and names each CRD once in a well-formed way.
func TestControllersAreWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9-]+(\.[a-z0-9-]+){2,}$`)
	version := regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	for _, c := range Controllers {
		t.Run(string(c.Name), func(t *testing.T) {
			g := NewWithT(t)
			_, err := os.Stat(filepath.Join("..", "..", "controllers", string(c.Name), "main.go"))
			g.Expect(err).NotTo(HaveOccurred(), "controllers/%s/main.go", c.Name)
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
	NewWithT(t).Expect(mains).To(HaveLen(len(Controllers)), "every controller binary is in the contract")
}

// The build stamps the version through VersionVariable; a moved package
// would silently leave every binary at the default.
func TestVersionVariableNamesThisPackage(t *testing.T) {
	NewWithT(t).Expect(VersionVariable).To(Equal(reflect.TypeOf(CRD{}).PkgPath() + ".version"))
}
