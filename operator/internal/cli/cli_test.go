package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/testenv"
)

// env is the API server of TestPreflight, with Portico's CRDs only.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{Setup: func(_ context.Context, e *testenv.Env) error {
		env = e
		return nil
	}}))
}

func TestCatalogAndVersion(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	cmd := NewRootCommand(&out)
	cmd.SetArgs([]string{"catalog"})
	g.Expect(cmd.Execute()).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("ratelimit-controller"))
	g.Expect(out.String()).To(ContainSubstring("envoyfilters.networking.istio.io/v1alpha3"))
	g.Expect(out.String()).To(ContainSubstring("gateway-controller"))
	g.Expect(out.String()).To(ContainSubstring("certificates.cert-manager.io/v1 (when spec.gateway.certificate.certManager is set)"))

	out.Reset()
	cmd = NewRootCommand(&out)
	cmd.SetArgs([]string{"version"})
	g.Expect(cmd.Execute()).To(Succeed())
	g.Expect(out.String()).To(Equal(contract.Version() + "\n"))
}

// --version prints the stamped version (contract.Version), like the
// version subcommand, and exits without a cluster.
func TestVersionFlag(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))

	for _, args := range [][]string{{"--version"}, {"version"}} {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(args)
		g.Expect(cmd.Execute()).To(Succeed(), "%v", args)
		g.Expect(out.String()).To(Equal(contract.Version()+"\n"), "%v", args)
		g.Expect(errOut.String()).To(BeEmpty(), "%v", args)
	}
	g := NewWithT(t)
	flag := NewRootCommand(&bytes.Buffer{}).Flags().Lookup("version")
	g.Expect(flag).NotTo(BeNil())
	g.Expect(flag.Shorthand).To(BeEmpty(), "-v is not taken")
}

func TestRelatedImages(t *testing.T) {
	g := NewWithT(t)
	g.Expect(relatedImages([]string{
		"RELATED_IMAGE_APIRULE_CONTROLLER=mirror/apirule:1", "RELATED_IMAGE_EMPTY=", "PATH=/bin",
	})).To(Equal(map[string]string{"RELATED_IMAGE_APIRULE_CONTROLLER": "mirror/apirule:1"}))
}

func TestPreflight(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	user, err := env.AddUser(envtest.User{Name: "preflight-admin", Groups: []string{"system:masters"}}, env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())

	preflight := func() (string, error) {
		var out bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetArgs([]string{"preflight", "--kubeconfig", path})
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}

	// Portico's own CRDs are installed, Istio's are not.
	out, err := preflight()
	var exit exitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "preflight fails when an enabled controller is blocked: %v", err)
	g.Expect(exit.code).To(Equal(1))
	g.Expect(out).To(ContainSubstring("apirule"))
	g.Expect(out).To(ContainSubstring("not installed: virtualservices.networking.istio.io/v1, authorizationpolicies.security.istio.io/v1, requestauthentications.security.istio.io/v1"))
	g.Expect(out).To(ContainSubstring("not installed: envoyfilters.networking.istio.io/v1alpha3"))
	g.Expect(out).To(ContainSubstring("not installed: gateways.networking.istio.io/v1, virtualservices.networking.istio.io/v1)"),
		"the gateway controller, without an APIGateway, needs no cert-manager")

	istio, err := testenv.IstioCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range istio {
		if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	g.Eventually(func(g Gomega) {
		out, err := preflight()
		g.Expect(err).NotTo(HaveOccurred(), out)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(line, "ratelimitservice") {
				// Not configured is not wanted: it does not fail preflight.
				g.Expect(line).To(ContainSubstring("NotConfigured"))
				g.Expect(line).To(ContainSubstring("spec.rateLimits.global is not set"))
				continue
			}
			g.Expect(line).NotTo(ContainSubstring(" no "))
		}
	}, "30s").Should(Succeed())
}
