package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/portico-dev/portico/operator/internal/catalog"
)

func newCatalogCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "catalog",
		Short: "List the controllers the operator can run and the CRDs each needs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CONTROLLER\tBINARY\tREQUIRED CRDS\tDEPENDS ON")
			for _, e := range catalog.Builtin {
				crds := make([]string, 0, len(e.Required)+len(e.SpecCRDs))
				for _, c := range e.Required {
					crds = append(crds, c.String())
				}
				for _, c := range e.SpecCRDs {
					crds = append(crds, fmt.Sprintf("%s (when %s)", c.CRD, c.When))
				}
				deps := "-"
				if len(e.DependsOn) > 0 {
					parts := make([]string, len(e.DependsOn))
					for i, d := range e.DependsOn {
						parts[i] = string(d)
					}
					deps = strings.Join(parts, ",")
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Name, e.Binary(), strings.Join(crds, ","), deps)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, e := range catalog.Builtin {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%s: %s", e.Name, e.Description)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
}
