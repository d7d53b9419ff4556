// Command kubectl-portico is the kubectl plugin of Portico: `kubectl
// portico explain` says what would happen to a request, reading the
// cluster with the caller's own credentials.
package main

import (
	"os"

	"github.com/portico-dev/portico/kubectl-portico/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
