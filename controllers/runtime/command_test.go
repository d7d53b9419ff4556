package runtime

import (
	"bytes"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Every controller binary prints its stamped version with --version, or
// the version subcommand, and exits without a cluster.
func TestVersion(t *testing.T) {
	stamped := version
	t.Cleanup(func() { version = stamped })
	version = "v1.2.3-test"
	// No cluster to reach: the command must not try.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))

	for _, name := range []string{"apirule", "ratelimit"} {
		for _, args := range [][]string{{"--version"}, {"version"}} {
			t.Run(name+" "+args[0], func(t *testing.T) {
				g := NewWithT(t)
				cmd := NewCommand(Controller{
					Name: name,
					Setup: func(ctrl.Manager, Environment) error {
						t.Error("the controller must not start")
						return nil
					},
				})
				var out, errOut bytes.Buffer
				cmd.SetOut(&out)
				cmd.SetErr(&errOut)
				cmd.SetArgs(args)
				g.Expect(cmd.Execute()).To(Succeed())
				g.Expect(out.String()).To(Equal("v1.2.3-test\n"))
				g.Expect(errOut.String()).To(BeEmpty())
			})
		}
	}
}

// --version has no shorthand: -v is not taken from a future verbosity flag.
func TestVersionFlagHasNoShorthand(t *testing.T) {
	g := NewWithT(t)
	cmd := NewCommand(Controller{Name: "apirule"})
	flag := cmd.Flags().Lookup("version")
	g.Expect(flag).NotTo(BeNil())
	g.Expect(flag.Shorthand).To(BeEmpty())
}
