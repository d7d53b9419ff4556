// Package benchkit is what Portico's benchmarks share: finding the
// repository, bringing the local kwok cluster up and down through
// hack/cluster.sh, free loopback ports and progress logging. It measures
// nothing itself.
package benchkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/portico-dev/portico/test/testenv"
)

// RepoRoot finds the module root from the working directory.
func RepoRoot() (string, error) {
	if d := testenv.RepoRoot(); FileExists(filepath.Join(d, "hack", "cluster.sh")) {
		return d, nil
	}
	return "", fmt.Errorf("run the bench from the portico repository (no go.mod of github.com/portico-dev/portico above the working directory)")
}

// FileExists reports whether path exists.
func FileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ClusterUp creates or reuses the kwok cluster; hack/cluster.sh prints the
// kubeconfig path as its last stdout line and logs to stderr.
func ClusterUp(ctx context.Context, root, name string) (string, error) {
	Logf("bringing up cluster %s (hack/cluster.sh up %s)", name, name)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "cluster.sh"), "up", name)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/cluster.sh up %s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	kubeconfig := strings.TrimSpace(lines[len(lines)-1])
	if kubeconfig == "" || !FileExists(kubeconfig) {
		return "", fmt.Errorf("hack/cluster.sh up %s: last output line %q is not a kubeconfig file", name, kubeconfig)
	}
	return kubeconfig, nil
}

// ClusterDown deletes the kwok cluster name.
func ClusterDown(root, name string) error {
	Logf("deleting cluster %s", name)
	cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "down", name)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/cluster.sh down %s: %w", name, err)
	}
	return nil
}

// Logf prints a progress line on stderr.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// FreeLoopbackAddr returns a 127.0.0.1 address with a port free right now.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
