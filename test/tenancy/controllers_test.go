package tenancy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

// controllerNames are the binaries under test: the controllers and
// Portico's rate-limit service (which global RateLimits reach).
var controllerNames = []string{"apirule", "ratelimit", "ratelimitservice"}

// serviceAccounts are the ServiceAccounts binaries run as that are not
// named <name>-controller.
var serviceAccounts = map[string]string{"ratelimitservice": globallimit.ServiceName}

// processArgs are each binary's flags beyond the standard ones, and
// processEnv its environment: the ratelimit controller writes global
// limits for the rate-limit service, which counts in the suite's Redis.
var (
	processArgs = map[string]func() []string{
		"ratelimit": func() []string { return []string{"--global-ratelimit"} },
		"ratelimitservice": func() []string {
			return []string{"--grpc-bind-address=" + rlsAddr, "--redis-config-dir=" + redisConfigDir, "--max-keys-per-rule=" + strconv.Itoa(maxKeysPerRule)}
		},
	}
	processEnv = []string{contract.EnvPodNamespace + "=" + systemNS}
)

// controller is one controller binary run as a process under its
// ServiceAccount.
type controller struct {
	name       string
	binary     string
	kubeconfig string

	mu        sync.Mutex
	process   *framework.Process
	probeAddr string
	starts    int
}

var controllers = map[string]*controller{}

// startControllers builds every controller binary and starts each with a
// kubeconfig impersonating its ServiceAccount. It waits for them to become
// ready, but a controller that does not is a finding for
// TestControllersRunUnderTheirServiceAccounts, not a reason to run nothing.
func startControllers(ctx context.Context, adminKubeconfig string) error {
	for _, name := range controllerNames {
		binary, err := testenv.BuildController(ctx, workDir, name)
		if err != nil {
			return err
		}
		c := &controller{name: name, binary: binary}
		sa := name + "-controller"
		if s, ok := serviceAccounts[name]; ok {
			sa = s
		}
		kubeconfig, err := framework.ImpersonatingKubeconfig(adminKubeconfig, workDir, systemNS, sa)
		if err != nil {
			return err
		}
		c.kubeconfig = kubeconfig
		if err := c.start(); err != nil {
			return err
		}
		controllers[name] = c
	}
	for _, c := range controllers {
		if err := c.awaitReady(ctx, eventually); err != nil {
			fmt.Fprintln(os.Stderr, "tenancy suite:", err)
		}
	}
	return nil
}

func stopControllers() {
	for _, c := range controllers {
		c.stop()
	}
}

// start runs the binary with a fresh health address; each run logs to its
// own file in workDir.
func (c *controller) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	probe, err := testenv.FreeLoopbackAddr()
	if err != nil {
		return err
	}
	c.starts++
	log := filepath.Join(workDir, fmt.Sprintf("%s-controller.%d.log", c.name, c.starts))
	args := []string{"--kubeconfig=" + c.kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=" + probe}
	if more, ok := processArgs[c.name]; ok {
		args = append(args, more()...)
	}
	p, err := framework.StartProcess(c.binary, args, processEnv, log)
	if err != nil {
		return fmt.Errorf("start %s-controller: %w", c.name, err)
	}
	c.process, c.probeAddr = p, probe
	return nil
}

func (c *controller) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.process.Stop()
}

// restart stops the process and starts it again.
func (c *controller) restart() error {
	c.stop()
	return c.start()
}

// ready reports whether the process runs and its /readyz answers 200.
func (c *controller) ready(ctx context.Context) error {
	c.mu.Lock()
	p, addr := c.process, c.probeAddr
	c.mu.Unlock()
	if p.Exited() {
		return fmt.Errorf("%s-controller exited; see %s", c.name, workDir)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s-controller /readyz: %s", c.name, resp.Status)
	}
	return nil
}

func (c *controller) awaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := c.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s-controller not ready after %s: %w (logs in %s)", c.name, timeout, err, workDir)
		case <-time.After(poll):
		}
	}
}
