//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"sync"

	. "github.com/onsi/gomega"

	"github.com/portico-dev/portico/test/framework"
)

// releaseTools holds one sync.Once per command of the release module.
var releaseTools sync.Map

// releaseTool is the binary of the release module's command cmd
// (hack/release/cmd/<cmd>: release, images, bundle), built once per suite
// into bin/release-tools: the release tooling is a module of its own, so it
// is built where its go.mod is and run from the repository root.
func releaseTool(ctx context.Context, cmd string) string {
	bin := filepath.Join(root, "bin", "release-tools", cmd)
	once, _ := releaseTools.LoadOrStore(cmd, new(sync.Once))
	once.(*sync.Once).Do(func() {
		_, err := framework.Run(ctx, filepath.Join(root, "hack", "release"), "go", "build", "-o", bin, "./cmd/"+cmd)
		Expect(err).NotTo(HaveOccurred(), "build the release module's %s command", cmd)
	})
	return bin
}
