package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/portico-dev/portico/internal/contract"
)

// DefaultNamespace holds the operator and its controllers unless
// POD_NAMESPACE or --namespace says otherwise.
const DefaultNamespace = "portico-system"

// DefaultRegistry prefixes default controller images.
const DefaultRegistry = "ghcr.io/portico-dev"

// exitError carries an exit code without printing a usage message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Execute runs the command line and returns the process exit code.
func Execute() int {
	cmd := NewRootCommand(os.Stdout)
	// SIGTERM or SIGINT cancels the context: the manager stops its workers,
	// releases the leader Lease and returns.
	if err := cmd.ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			return exit.code
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return 0
}

// NewRootCommand builds the command tree.
func NewRootCommand(out io.Writer) *cobra.Command {
	opts := &runOptions{zap: zap.Options{Development: false}}
	cmd := &cobra.Command{
		Use:   contract.OperatorName,
		Short: "Runs Portico's gateway controllers while the CRDs they need are installed",
		Long: `portico-operator reads the cluster-scoped APIGateway "default" and runs each
gateway controller of its catalog as a Deployment, but only while every CRD
that controller needs is installed and established. It reports each
controller's readiness in the APIGateway status.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), opts)
		},
		// --version prints the version and exits before anything else runs.
		Version: contract.Version(),
	}
	cmd.SetOut(out)
	cmd.SetVersionTemplate("{{.Version}}\n")
	opts.bindFlags(cmd)
	// Declared here rather than by cobra, which would also take -v.
	cmd.Flags().Bool("version", false, "print the operator version and exit")

	// --kubeconfig is registered by controller-runtime on the standard flag
	// set; every subcommand shares it.
	kubeconfig := flag.CommandLine.Lookup("kubeconfig")
	cmd.PersistentFlags().AddGoFlag(kubeconfig)

	cmd.AddCommand(newVersionCommand(), newCatalogCommand(), newPreflightCommand())
	return cmd
}

func namespaceDefault() string {
	if ns := strings.TrimSpace(os.Getenv(contract.EnvPodNamespace)); ns != "" {
		return ns
	}
	return DefaultNamespace
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the operator version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), contract.Version())
		},
	}
}
