package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/portico-dev/portico/test/testenv"
)

// stopGrace is how long a process may take to exit after SIGTERM before it
// is killed.
const stopGrace = 15 * time.Second

// Process is a host process started by a suite or a benchmark, its output
// going to a log file.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how it exited; set before done is closed
}

// startLogged starts cmd with its output in log, which is closed when the
// process exits. The process is killed when the process that started it
// dies, so a suite or benchmark killed by a timeout leaves nothing behind.
func startLogged(cmd *exec.Cmd, log *os.File) (*Process, error) {
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited (nil for status 0); nil while it runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
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
	if p == nil {
		return
	}
	_ = p.Terminate()
}

// Terminate stops the process like Stop and returns how it exited: nil
// when it shut down cleanly (status 0).
func (p *Process) Terminate() error {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	return p.err
}

// runCommand runs a command in dir with its stderr going to stderr and
// returns its stdout.
func runCommand(ctx context.Context, dir string, stderr io.Writer, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// ServingAddrs returns two loopback addresses free right now, for a Portico
// binary's metrics and health probes.
func ServingAddrs() (metrics, probe string, err error) {
	if metrics, err = testenv.FreeLoopbackAddr(); err != nil {
		return "", "", err
	}
	if probe, err = testenv.FreeLoopbackAddr(); err != nil {
		return "", "", err
	}
	return metrics, probe, nil
}
