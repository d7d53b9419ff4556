package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
	"github.com/portico-dev/portico/test/testenv"
)

// fieldOwner is the bench's field manager.
const fieldOwner = "portico-bench"

const (
	// kindDeployment, kindCRD and kindAPIGateway are the kinds the bench
	// watches.
	kindDeployment = "Deployment"
	kindCRD        = "CustomResourceDefinition"
	kindAPIGateway = "APIGateway"
)

var (
	// gatedCRD is required by the ratelimit controller only, so deleting it
	// blocks exactly one controller: gatedDeployment.
	gatedCRD        = contract.EnvoyFilters
	gatedDeployment = contract.RateLimit.Binary()
	// healedDeployment is deleted by hand for (b).
	healedDeployment = contract.APIRule.Binary()
)

// bench holds the clients, the informers and the operator process.
type bench struct {
	opts options
	conn *framework.Connection
	// c writes to the API server directly; reads go to the informers.
	c         client.Client
	rest      rest.Interface
	informers *framework.Informers
	hub       *hub
	op        *framework.Server
	// gatedSource is the gated CRD as installed, to create it again.
	gatedSource *apiextensionsv1.CustomResourceDefinition
}

// run does the whole bench and reports to w; errors mean the run broke
// (or, for the short mode, that the operator did not react correctly), not
// that a target was missed.
func run(ctx context.Context, o options, w io.Writer) (results, error) {
	o.operator = framework.RepoPath(o.operator)
	b := &bench{opts: o, hub: newHub()}
	return framework.Measure(ctx, o.BenchOptions, w, framework.Spec[results]{
		Binaries: []string{o.operator},
		// Every event goes to the hub with the time it arrived.
		Watches: []framework.Watch{
			{Kind: kindCRD, Object: &apiextensionsv1.CustomResourceDefinition{}},
			{Kind: kindDeployment, Object: &appsv1.Deployment{}},
			{Kind: kindAPIGateway, Object: &operatorv1alpha1.APIGateway{}},
		},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Namespaces: map[string]cache.Config{o.namespace: {}}},
		}},
		Handle: b.hub.publish,
		Run: func(ctx context.Context, conn *framework.Connection) (results, error) {
			b.conn, b.c, b.informers = conn, conn.Client, conn.Informers
			return b.run(ctx)
		},
	})
}

// run starts the operator on the cluster and measures.
func (b *bench) run(ctx context.Context) (res results, retErr error) {
	dc, err := discovery.NewDiscoveryClientForConfig(b.conn.Config)
	if err != nil {
		return res, err
	}
	b.rest = dc.RESTClient()
	if b.gatedSource, err = framework.FindCRD(b.conn.CRDs, gatedCRD); err != nil {
		return res, err
	}
	if err := b.applyPrerequisites(ctx); err != nil {
		return res, err
	}
	if b.op, err = b.startOperator(ctx); b.op != nil {
		defer func() { retErr = errors.Join(retErr, b.stopOperator()) }()
	}
	if err != nil {
		return res, err
	}
	return b.measure(ctx)
}

// applyPrerequisites applies what the operator needs: its namespace, the
// controllers' ServiceAccounts and the APIGateway.
func (b *bench) applyPrerequisites(ctx context.Context) error {
	framework.Logf("applying namespace %s, ServiceAccounts and APIGateway %s", b.opts.namespace, operatorv1alpha1.SingletonName)
	apply := func(obj runtime.ApplyConfiguration, what string) error {
		if err := b.c.Apply(ctx, obj, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		return nil
	}
	if err := apply(corev1ac.Namespace(b.opts.namespace), "namespace "+b.opts.namespace); err != nil {
		return err
	}
	for _, c := range contract.Controllers {
		if err := apply(corev1ac.ServiceAccount(c.Binary(), b.opts.namespace), "ServiceAccount "+c.Binary()); err != nil {
			return err
		}
	}
	samples, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "config", "samples", "operator_v1alpha1_apigateway.yaml"))
	if err != nil {
		return err
	}
	for _, s := range samples {
		if err := apply(client.ApplyConfigurationFromUnstructured(s), s.GetKind()+" "+s.GetName()); err != nil {
			return err
		}
	}
	return nil
}

// startOperator runs the operator binary against the cluster and waits for
// its /readyz (caches synced). A returned operator must be stopped, also
// with an error.
func (b *bench) startOperator(ctx context.Context) (*framework.Server, error) {
	op, err := framework.StartServer(framework.ServerConfig{
		Name: contract.OperatorName, Binary: b.opts.operator,
		Args: append([]string{
			"--kubeconfig=" + b.conn.Kubeconfig,
			contract.Flag(contract.FlagNamespace, b.opts.namespace),
			contract.Flag(contract.FlagLeaderElect, "false"),
			"--zap-time-encoding=rfc3339nano",
		}, b.opts.operatorFlags...),
	})
	if err != nil {
		return nil, err
	}
	framework.Logf("operator started (pid %d), log: %s", op.Pid(), op.LogPath)
	framework.Logf("waiting for the operator's /readyz")
	return op, op.WaitReady(ctx, 2*time.Minute)
}

func (b *bench) stopOperator() error {
	framework.Logf("stopping the operator (SIGTERM)")
	return b.op.Stop()
}

// writes reads rest_client_requests_total from the operator's /metrics,
// summed over code and host, by method, without GETs.
func (b *bench) writes(ctx context.Context) (writeCount, error) {
	m, err := b.op.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	if !m.Has(requestsTotal) {
		return nil, fmt.Errorf("the operator's metrics at %s have no %s", b.op.MetricsURL, requestsTotal)
	}
	return writesOf(m), nil
}

// requestsTotal is client-go's request counter.
const requestsTotal = "rest_client_requests_total"

func writesOf(m framework.Metrics) writeCount {
	out := writeCount{}
	for method, v := range m.ByLabel(requestsTotal, "method") {
		if !strings.EqualFold(method, "GET") {
			out[method] = v
		}
	}
	return out
}
