package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/portico-dev/portico/test/framework"
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
	out, err := c.script(ctx, "up")
	if err != nil {
		return "", err
	}
	kubeconfig := framework.LastLine(out)
	if _, err := os.Stat(kubeconfig); kubeconfig == "" || err != nil {
		return "", fmt.Errorf("hack/cluster.sh up %s: last output line %q is not a kubeconfig file", c.Name, kubeconfig)
	}
	return kubeconfig, nil
}

// Down deletes the cluster (nothing when it does not exist).
func (c KwokCluster) Down(ctx context.Context) error {
	_, err := c.script(ctx, "down")
	return err
}

// script runs `hack/cluster.sh command name` from the repository's top
// directory, its progress going to Log, and returns its output.
func (c KwokCluster) script(ctx context.Context, command string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, "hack", "cluster.sh"), command, c.Name)
	cmd.Dir = c.Root
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, c.Log
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("hack/cluster.sh %s %s: %w", command, c.Name, err)
	}
	return stdout.String(), nil
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
