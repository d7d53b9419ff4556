package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Target names where the suite runs.
type Target string

// The targets.
const (
	TargetLocal Target = "local"
	TargetKind  Target = "kind"
	TargetNode  Target = "node"
)

// RealPods reports whether the target runs real pods (kind, node), as
// opposed to kwok's simulated ones.
func (t Target) RealPods() bool { return t == TargetKind || t == TargetNode }

// TargetFromEnv reads E2E_TARGET (default local).
func TargetFromEnv() (Target, error) {
	switch t := Target(strings.TrimSpace(os.Getenv("E2E_TARGET"))); t {
	case "", TargetLocal:
		return TargetLocal, nil
	case TargetKind, TargetNode:
		return t, nil
	default:
		return "", fmt.Errorf("E2E_TARGET must be local, node or kind, not %q", t)
	}
}

// Run runs a command from the repository root and returns its stdout; the
// error carries stderr.
func Run(ctx context.Context, root string, name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	out, err := runCommand(ctx, root, &stderr, name, args...)
	if err != nil {
		return out, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return out, nil
}

// LastLine returns the last non-empty line of out.
func LastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// StartProcess starts a binary with its output in logPath.
func StartProcess(binary string, args []string, env []string, logPath string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	return startLogged(cmd, log)
}
