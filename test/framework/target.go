package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// LastLine returns the last non-empty line of out.
func LastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Process is a host process started by the suite.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
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
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits, killing after a grace period.
func (p *Process) Stop() {
	if p == nil || p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
