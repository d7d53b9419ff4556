package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/test/testenv"
)

// Connection is the cluster a benchmark runs on.
type Connection struct {
	Kubeconfig string
	// Config allows the benchmark's own requests 2,000 per second: what
	// it measures must never wait for its client-side rate limiter.
	Config *rest.Config
	// Scheme has the types the benchmark uses; Client reads from and
	// writes to the API server directly.
	Scheme *runtime.Scheme
	Client client.Client
	// CRDs are the CRDs installed (PorticoAndIstioCRDs, with Spec.GatewayAPI
	// the Gateway API's too).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Informers deliver the benchmark's watches.
	Informers *Informers
	// Cluster is the kwok cluster the benchmark brought up, nil when
	// given a kubeconfig.
	Cluster *KwokCluster
}

// Connect brings up the kwok cluster unless o.Kubeconfig names a cluster.
func (o BenchOptions) Connect(ctx context.Context) (*Connection, error) {
	c := &Connection{Kubeconfig: o.Kubeconfig}
	if c.Kubeconfig == "" {
		c.Cluster = &KwokCluster{Root: testenv.RepoRoot(), Name: o.Cluster, Log: os.Stderr}
		Logf("bringing up cluster %s (hack/cluster.sh up %s)", o.Cluster, o.Cluster)
		var err error
		if c.Kubeconfig, err = c.Cluster.Up(ctx); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	c.Config = cfg
	return c, nil
}

// Close deletes the cluster when the options say so; it does not depend on
// the benchmark's context, which may have been cancelled.
func (c *Connection) Close(o BenchOptions) error {
	if c.Cluster == nil || !o.Down {
		return nil
	}
	Logf("deleting cluster %s", c.Cluster.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return c.Cluster.Down(ctx)
}

// Where names the cluster for reports.
func (c *Connection) Where() string {
	if c.Cluster != nil {
		return "cluster " + c.Cluster.Name
	}
	return c.Kubeconfig
}

// Describe names what was measured, for the header of a report: the
// binary's version, the cluster, the machine and the time.
func (c *Connection) Describe(ctx context.Context, binary string) (string, error) {
	version, err := exec.CommandContext(ctx, binary, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", binary, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return "", err
	}
	server, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	return fmt.Sprintf("%s %s on %s (kube-apiserver %s, kwok), %d CPUs, %s", filepath.Base(binary),
		strings.TrimSpace(string(version)), c.Where(), server.GitVersion, goruntime.NumCPU(),
		time.Now().UTC().Format(time.RFC3339)), nil
}
