package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Explain runs `kubectl explain field` (kubectl of AssetsDir) against the
// environment's API server, with a kubeconfig and a discovery cache of its
// own, and returns its output.
func (e *Env) Explain(field string) (string, error) {
	assets, err := AssetsDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "portico-explain-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	config := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(config, e.KubeConfig, 0o600); err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", config, "--cache-dir", filepath.Join(dir, "cache"),
		"explain", field).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl explain %s: %w: %s", field, err, out)
	}
	return string(out), nil
}
