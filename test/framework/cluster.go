package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// KwokCluster is a local kwok cluster (fake nodes, real control plane)
// that hack/cluster.sh manages, offline, from the binaries of
// hack/testbin.sh.
type KwokCluster struct {
	// Root is the repository's top directory.
	Root string
	Name string
	// Log receives hack/cluster.sh's progress (stderr).
	Log io.Writer
}

// Up creates the cluster, or starts it again as it was, and returns its
// kubeconfig.
func (c KwokCluster) Up(ctx context.Context) (string, error) {
	out, err := runCommand(ctx, c.Root, c.Log, filepath.Join(c.Root, "hack", "cluster.sh"), "up", c.Name)
	if err != nil {
		return "", err
	}
	kubeconfig := LastLine(out)
	if _, err := os.Stat(kubeconfig); kubeconfig == "" || err != nil {
		return "", fmt.Errorf("hack/cluster.sh up %s: last output line %q is not a kubeconfig file", c.Name, kubeconfig)
	}
	return kubeconfig, nil
}

// Down deletes the cluster (nothing when it does not exist).
func (c KwokCluster) Down(ctx context.Context) error {
	_, err := runCommand(ctx, c.Root, c.Log, filepath.Join(c.Root, "hack", "cluster.sh"), "down", c.Name)
	return err
}

// ControlPlanePIDs returns the process IDs of the cluster's kube-apiserver,
// etcd and kube-controller-manager (whose garbage collector and quota
// monitors watch every object), as kwokctl records them; those it cannot
// read are left out.
func (c KwokCluster) ControlPlanePIDs() map[string]int {
	cacheDir := os.Getenv("XDG_CACHE_HOME")
	if cacheDir == "" {
		home, _ := os.UserHomeDir()
		cacheDir = filepath.Join(home, ".cache")
	}
	pids := map[string]int{}
	for _, component := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		raw, err := os.ReadFile(filepath.Join(cacheDir, "portico", "kwok", "clusters", c.Name, "pids", component+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			pids[component] = pid
		}
	}
	return pids
}
