package runner

import (
	"bytes"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-dev/portico/internal/contract"
)

// Every controller binary prints its stamped version (contract.Version)
// with --version, or the version subcommand, and exits without a cluster.
func TestVersion(t *testing.T) {
	// No cluster to reach: the command must not try.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))

	for _, c := range contract.Controllers {
		for _, args := range [][]string{{"--version"}, {"version"}} {
			t.Run(string(c.Name)+" "+args[0], func(t *testing.T) {
				g := NewWithT(t)
				cmd := NewCommand(Controller{
					Contract: c,
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
				g.Expect(out.String()).To(Equal(contract.Version() + "\n"))
				g.Expect(errOut.String()).To(BeEmpty())
			})
		}
	}
}

// --version has no shorthand: -v is not taken from a future verbosity flag.
func TestVersionFlagHasNoShorthand(t *testing.T) {
	g := NewWithT(t)
	cmd := NewCommand(Controller{Contract: contract.APIRule})
	flag := cmd.Flags().Lookup("version")
	g.Expect(flag).NotTo(BeNil())
	g.Expect(flag.Shorthand).To(BeEmpty())
}

// The flags each controller declares in the contract (which the operator
// checks spec.controllers[].extraArgs against) are exactly the flags of
// its binary's command: every controller's main runs runner.Main with its
// contract.Controller, which builds this command, plus the binary's own
// flags that the operator sets (OwnReserved). The rate-limit service is not
// a controller of this runner: its own package checks its flags.
func TestContractDeclaresEveryControllerFlag(t *testing.T) {
	for _, c := range contract.Controllers {
		if c.Name == contract.RateLimitService.Name {
			continue
		}
		t.Run(string(c.Name), func(t *testing.T) {
			g := NewWithT(t)
			var got []string
			NewCommand(Controller{Contract: c}).Flags().VisitAll(func(f *pflag.Flag) { got = append(got, f.Name) })
			g.Expect(append(got, c.OwnReserved...)).To(ConsistOf(c.Flags))
			g.Expect(c.Flags).To(ContainElements(contract.ReservedFlags), "a reserved flag the binary does not have reserves nothing")
		})
	}
}
