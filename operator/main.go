// Command portico-operator runs Portico's gateway controllers as
// Deployments while the CRDs they need are installed.
package main

import (
	"os"

	"github.com/portico-dev/portico/operator/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
