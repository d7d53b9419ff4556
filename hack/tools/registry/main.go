// Command registry is distribution's OCI registry (the reference
// implementation, github.com/distribution/distribution/v3) with the
// storage drivers the node e2e uses only: the filesystem and in-memory
// drivers. Upstream's command also links the Azure, GCS and S3 drivers and
// the proxy cache, whose SDKs are most of its compile; the registry code
// that serves, stores and garbage-collects is the same.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
