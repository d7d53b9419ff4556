package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/test/testenv"
)

// fieldOwner is the benchmarks' field manager.
const fieldOwner = "portico-bench"

// Report is what a benchmark measured.
type Report interface {
	// WriteTable writes the results for people: a table and notes.
	WriteTable(w io.Writer) error
	// PerfData returns the results for tools.
	PerfData() PerfData
}

// Spec describes a benchmark to Measure.
type Spec[R Report] struct {
	// Types are the kinds the benchmark reads and writes beyond those
	// testenv.Scheme always has.
	Types []func(*runtime.Scheme) error
	// GatewayAPI installs the Gateway API's standard CRDs
	// (testenv.GatewayAPICRDs) with Portico's and Istio's, before the
	// informers start and so before any controller does.
	GatewayAPI bool
	// Binaries must exist; the report's header names the first one's
	// version.
	Binaries []string
	// Watches run on informers (narrowed by Cache) whose events go to
	// Handle, from the moment the CRDs are installed until Run returned.
	Watches []Watch
	Cache   cache.Options
	Handle  func(Event)
	// Run measures on the connection.
	Run func(context.Context, *Connection) (R, error)
}

// Measure checks that the benchmark's binaries exist, connects to its
// cluster (bringing it up), installs the CRDs of a cluster with Portico
// and Istio (and the Gateway API's when asked), starts its informers and runs it. Then it writes its report
// to w under a header naming the binary, publishes its PerfData and
// closes the connection (deleting the cluster when asked, also after an
// error).
func Measure[R Report](ctx context.Context, o BenchOptions, w io.Writer, spec Spec[R]) (report R, retErr error) {
	for _, b := range spec.Binaries {
		if _, err := os.Stat(b); err != nil {
			return report, fmt.Errorf("%w (run `make build` first)", err)
		}
	}
	conn, err := o.Connect(ctx)
	if err != nil {
		return report, err
	}
	defer func() { retErr = errors.Join(retErr, conn.Close(o)) }()
	if err := conn.setUp(ctx, spec.Types, spec.GatewayAPI, 4*o.Timeout); err != nil {
		return report, err
	}
	spec.Cache.Scheme = conn.Scheme
	if conn.Informers, err = StartInformers(ctx, conn.Config, spec.Cache, spec.Watches, spec.Handle, o.Timeout); err != nil {
		return report, err
	}
	report, err = spec.Run(ctx, conn)
	conn.Informers.Stop()
	if err != nil {
		return report, err
	}
	header, err := conn.Describe(ctx, spec.Binaries[0])
	if err != nil {
		return report, err
	}
	fmt.Fprintf(w, "\n%s\n\n", header)
	if err := report.WriteTable(w); err != nil {
		return report, err
	}
	return report, o.Publish(w, report.PerfData())
}

// setUp creates the connection's client for types (testenv.Scheme's) and installs the CRDs
// of a cluster with Portico and Istio (PorticoAndIstioCRDs), with
// gatewayAPI the Gateway API's too.
func (c *Connection) setUp(ctx context.Context, types []func(*runtime.Scheme) error, gatewayAPI bool, timeout time.Duration) error {
	c.Scheme = testenv.Scheme(types...)
	var err error
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return err
	}
	if c.CRDs, err = PorticoAndIstioCRDs(); err != nil {
		return err
	}
	if gatewayAPI {
		crds, err := testenv.GatewayAPICRDs()
		if err != nil {
			return err
		}
		c.CRDs = append(c.CRDs, crds...)
	}
	Logf("applying %d CRDs", len(c.CRDs))
	return ApplyCRDs(ctx, c.Client, fieldOwner, c.CRDs, timeout)
}
