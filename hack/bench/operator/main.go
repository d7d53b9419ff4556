// Command operator is `make bench`: it measures how fast portico-operator
// reacts on a real, local control plane and how quiet it is when nothing
// changes.
//
// It brings up the offline kwok cluster "portico-bench" (hack/cluster.sh),
// installs the APIGateway CRD, the gateway.portico.dev CRDs and the real
// Istio CRDs of the istio.io/api module, the namespace, the controllers'
// ServiceAccounts and the APIGateway "default", then starts
// bin/portico-operator as a child process (metrics and probes on free
// loopback ports) and waits for its /readyz. The bench timestamps every
// event it measures in the handlers of its own informers; it never polls
// for a measured event.
//
//	(a) CRD Established -> Deployment created. Delete the EnvoyFilter CRD,
//	    wait until ratelimit-controller is gone and the CRD is removed, create
//	    the CRD again. t0: the bench's CRD watch sees Established=True on the
//	    new CRD; t1: its Deployment watch sees ratelimit-controller Added.
//	(b) Deployment deleted -> recreated. t0: the delete call for
//	    apirule-controller returned; t1: the Deployment watch sees an
//	    apirule-controller with a new UID.
//	(c) CRD deleted -> Deployment gone. t0: the delete call for the
//	    EnvoyFilter CRD returned (the API server has set its
//	    deletionTimestamp; the CRD itself is removed later, after the API
//	    server's finalizer); t1: the Deployment watch sees ratelimit-controller
//	    Deleted. (a) and (c) come from the same cycles.
//	(d) API writes in steady state: once everything is Ready and the
//	    operator's write counter has not moved for 15 s, the delta of
//	    rest_client_requests_total{method!="GET"} on the operator's /metrics
//	    over --steady.
//
// The bench and the operator see the same watch events, so in (a) the bench
// may see Established a little after the operator did (rarely, t1 < t0 by
// a fraction of a millisecond). (a) excludes the API server's own time from
// creating a CRD to Established (tens of ms; --verbose shows it).
//
// Between two cycles the bench waits until the APIGateway is Ready again and
// both Deployments are available, so cycles do not overlap, and before it
// deletes the CRD it lists EnvoyFilters once, so the API server has built
// the CRD's storage, as istiod's watch would on a real cluster (see
// waitCRDServing). p99 is the nearest-rank percentile: with fewer than 100
// cycles it is the maximum. --verbose prints each cycle's timeline, with
// times comparable to the operator's log (a temporary file, named on
// stderr).
//
// It prints one table to stdout (progress goes to stderr). Targets are
// reported as PASS/FAIL, not enforced: the exit code is non-zero only when
// the run itself broke. The operator is stopped with SIGTERM at the end; the
// cluster is left up for the next run (reusing it is fast) unless --down is
// given; remove it with `hack/cluster.sh down portico-bench`.
//
// Usage (from the repository root; `make bench` builds the operator first):
//
//	go run ./hack/bench/operator [--cycles 30] [--steady 60s] [--down]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/portico-dev/portico/hack/bench/benchkit"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

const (
	fieldOwner = "portico-bench"
	// gatedCRD is required by ratelimit only, so deleting it blocks exactly
	// one controller.
	gatedCRD        = "envoyfilters.networking.istio.io"
	gatedDeployment = "ratelimit-controller"
	// healedDeployment is deleted by hand for (b).
	healedDeployment = "apirule-controller"
	latencyTarget    = 100 * time.Millisecond
	// quietFor is how long the operator's write counter must stand still
	// before the steady-state window opens: longer than client-go's event
	// recorder waits before it retries a failed Event write (10 s + 25%
	// jitter), so an Event of the last cycle does not count as steady state.
	quietFor = 15 * time.Second
)

// controllerDeployments are the Deployments the operator manages (and the
// ServiceAccounts their pods run as).
var controllerDeployments = []string{"apirule-controller", "ratelimit-controller"}

// gatewayCRDs are generated into config/crd/bases by the controllers; while
// a file is missing the bench installs a minimal served CRD of that name,
// which is all the operator's gating looks at.
var gatewayCRDs = []struct{ plural, kind string }{{"apirules", "APIRule"}, {"ratelimits", "RateLimit"}}

type options struct {
	cycles     int
	steady     time.Duration
	timeout    time.Duration
	cluster    string
	kubeconfig string
	operator   string
	namespace  string
	down       bool
	verbose    bool
	// operatorFlags are extra flags for the operator (diagnostics).
	operatorFlags []string
}

func main() {
	o := options{}
	// Not flag.CommandLine: controller-runtime registers --kubeconfig there.
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&o.cycles, "cycles", 30, "measured cycles for each of (a)+(c) and (b)")
	fs.DurationVar(&o.steady, "steady", 60*time.Second, "length of the steady-state window of (d)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "limit for any single wait (an event, a rollout)")
	fs.StringVar(&o.cluster, "cluster", "portico-bench", "name of the kwok cluster hack/cluster.sh brings up")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "use this cluster instead of bringing one up with hack/cluster.sh (--down is ignored)")
	fs.StringVar(&o.operator, "operator", "bin/portico-operator", "operator binary, as make build writes it")
	fs.StringVar(&o.namespace, "namespace", "portico-system", "namespace of the operator's Deployments")
	fs.BoolVar(&o.down, "down", false, "delete the cluster at the end (default: leave it up for the next run)")
	fs.BoolVar(&o.verbose, "verbose", false, "print every cycle's timeline (ms after t0) to stderr")
	fs.Func("operator-flag", "extra operator flag, repeatable (e.g. --operator-flag=--zap-log-level=5 logs every reconcile)", func(v string) error {
		o.operatorFlags = append(o.operatorFlags, v)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./hack/bench/operator [flags]\n\n"+
			"Measures portico-operator's reaction times and steady-state API writes on a local kwok cluster.\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if fs.NArg() > 0 || o.cycles < 1 || o.steady <= 0 || o.timeout <= 0 {
		fs.Usage()
		os.Exit(2)
	}
	// The bench's informers log through controller-runtime; what matters
	// is returned as an error instead.
	ctrl.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: error: %v\n", err)
		os.Exit(1)
	}
}

// run does the whole bench; errors mean the run broke, not that a target
// was missed.
func run(ctx context.Context, o options) (retErr error) {
	root, err := benchkit.RepoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.operator) {
		o.operator = filepath.Join(root, o.operator)
	}
	if _, err := os.Stat(o.operator); err != nil {
		return fmt.Errorf("operator binary: %w (run `make build` first)", err)
	}

	kubeconfig := o.kubeconfig
	if kubeconfig == "" {
		if kubeconfig, err = benchkit.ClusterUp(ctx, root, o.cluster); err != nil {
			return err
		}
		if o.down {
			defer func() {
				// The run's context may be cancelled; the cluster goes anyway.
				retErr = errors.Join(retErr, benchkit.ClusterDown(root, o.cluster))
			}()
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	// The bench must never wait for its own client-side rate limiter: that
	// would shift t0 of (b) and (c).
	cfg.QPS, cfg.Burst = 1000, 1000

	b := &bench{opts: o, root: root, cfg: cfg, hub: newHub()}
	if err := b.setup(ctx); err != nil {
		return err
	}

	op, err := startOperator(o, kubeconfig)
	if err != nil {
		return err
	}
	b.op = op
	defer func() { retErr = errors.Join(retErr, op.stop()) }()
	benchkit.Logf("operator started (pid %d), log: %s", op.cmd.Process.Pid, op.logPath)
	if err := op.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}

	// The operator's first reconcile may still be updating what an earlier
	// run left (a new image tag, say): wait until it is done.
	benchkit.Logf("waiting for both controllers to be Ready and the operator to be idle")
	if err := b.waitSettled(ctx, 4*o.timeout); err != nil {
		return err
	}
	if _, err := b.waitQuiet(ctx, 2*time.Second); err != nil {
		return err
	}

	created, gone, err := b.runCRDCycles(ctx)
	if err != nil {
		return err
	}
	recreated, err := b.runSelfHealCycles(ctx)
	if err != nil {
		return err
	}
	writes, err := b.steadyWrites(ctx)
	if err != nil {
		return err
	}

	header, err := b.describe(ctx)
	if err != nil {
		return err
	}
	printTable(os.Stdout, header, o, created, recreated, gone, writes)
	return nil
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, apiextensionsv1.AddToScheme, operatorv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// bench holds the clients, the informers and the operator process.
type bench struct {
	opts options
	root string
	cfg  *rest.Config
	// c writes to the API server directly; reads go to cache.
	c     client.Client
	rest  rest.Interface
	cache cache.Cache
	hub   *hub
	op    *operatorProcess
	// gatedSource is the EnvoyFilter CRD as installed, to create it again.
	gatedSource *unstructured.Unstructured
}

// setup installs the CRDs and the objects the operator needs and starts
// the bench's informers.
func (b *bench) setup(ctx context.Context) error {
	var err error
	if b.c, err = client.New(b.cfg, client.Options{Scheme: scheme()}); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(b.cfg)
	if err != nil {
		return err
	}
	b.rest = dc.RESTClient()

	crds, err := b.sourceCRDs()
	if err != nil {
		return err
	}
	if err := b.waitTerminatingCRDs(ctx, crds); err != nil {
		return err
	}
	benchkit.Logf("applying %d CRDs", len(crds))
	for _, crd := range crds {
		if err := b.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd.DeepCopy()),
			client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.GetName(), err)
		}
		if crd.GetName() == gatedCRD {
			b.gatedSource = crd
		}
	}

	if err := b.startInformers(ctx); err != nil {
		return err
	}
	for _, crd := range crds {
		name := crd.GetName()
		if err := b.waitUntil(ctx, b.opts.timeout, "CRD "+name+" Established", func(ctx context.Context) (bool, string, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := b.cache.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
				return false, "", client.IgnoreNotFound(err)
			}
			return established(got) && got.DeletionTimestamp == nil, "", nil
		}); err != nil {
			return err
		}
	}

	benchkit.Logf("applying namespace %s, ServiceAccounts and APIGateway %s", b.opts.namespace, operatorv1alpha1.SingletonName)
	if err := b.c.Apply(ctx, corev1ac.Namespace(b.opts.namespace), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply namespace %s: %w", b.opts.namespace, err)
	}
	for _, sa := range controllerDeployments {
		if err := b.c.Apply(ctx, corev1ac.ServiceAccount(sa, b.opts.namespace), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply ServiceAccount %s/%s: %w", b.opts.namespace, sa, err)
		}
	}
	samples, err := readManifests(filepath.Join(b.root, "config", "samples", "operator_v1alpha1_apigateway.yaml"))
	if err != nil {
		return err
	}
	for _, s := range samples {
		if err := b.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(s), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", s.GetKind(), s.GetName(), err)
		}
	}
	return nil
}

// waitTerminatingCRDs waits for CRDs left terminating by an interrupted run
// to be removed, since applying them again would not bring them back.
// Setup only, so it polls.
func (b *bench) waitTerminatingCRDs(ctx context.Context, crds []*unstructured.Unstructured) error {
	timeout := 4 * b.opts.timeout
	for _, crd := range crds {
		name := crd.GetName()
		logged := false
		deadline := time.Now().Add(timeout)
		for {
			got := &metav1.PartialObjectMetadata{}
			got.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			err := b.c.Get(ctx, client.ObjectKey{Name: name}, got)
			if client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("read CRD %s: %w", name, err)
			}
			if err != nil || got.DeletionTimestamp == nil {
				break
			}
			if !logged {
				benchkit.Logf("CRD %s is still being deleted (left by an earlier run); waiting for it to go", name)
				logged = true
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s is still terminating after %s: the API server's CRD finalizer backs off "+
					"exponentially after failures; wait and retry, or start afresh with `hack/cluster.sh down %s`", name, timeout, b.opts.cluster)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// sourceCRDs returns every CRD to install: config/crd/bases, a minimal CRD
// for each gateway.portico.dev CRD whose file is missing, and every Istio
// CRD of the istio.io/api module (a cluster with Istio has all of them).
func (b *bench) sourceCRDs() ([]*unstructured.Unstructured, error) {
	var crds []*unstructured.Unstructured
	files, err := filepath.Glob(filepath.Join(b.root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	istio, err := testenv.ModuleDir("istio.io/api")
	if err != nil {
		return nil, err
	}
	files = append(files, filepath.Join(istio, "kubernetes", "customresourcedefinitions.gen.yaml"))
	for _, f := range files {
		objs, err := readManifests(f)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj)
			}
		}
	}
	has := func(name string) bool {
		return slices.ContainsFunc(crds, func(u *unstructured.Unstructured) bool { return u.GetName() == name })
	}
	for _, g := range gatewayCRDs {
		if name := g.plural + ".gateway.portico.dev"; !has(name) {
			benchkit.Logf("config/crd/bases/gateway.portico.dev_%s.yaml is missing: installing a minimal CRD %s", g.plural, name)
			crds = append(crds, minimalCRD("gateway.portico.dev", g.plural, g.kind, "v1alpha1"))
		}
	}
	if !has(gatedCRD) {
		return nil, fmt.Errorf("no source for CRD %s in the istio.io/api module", gatedCRD)
	}
	return crds, nil
}

// readManifests parses every object of a multi-document YAML file.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		// Generated CRDs carry an empty status; apply ignores it anyway.
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, u)
	}
}

func minimalCRD(group, plural, kind, version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": plural, "kind": kind, "listKind": kind + "List", "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// startInformers watches CRDs, the Deployments of the namespace and the
// APIGateways; every event goes to the hub with the time it arrived.
func (b *bench) startInformers(ctx context.Context) error {
	var err error
	b.cache, err = cache.New(b.cfg, cache.Options{
		Scheme:           scheme(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Namespaces: map[string]cache.Config{b.opts.namespace: {}}},
		},
	})
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{&apiextensionsv1.CustomResourceDefinition{}, &appsv1.Deployment{}, &operatorv1alpha1.APIGateway{}} {
		inf, err := b.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { b.hub.publish(added, obj) },
			UpdateFunc: func(_, obj any) { b.hub.publish(updated, obj) },
			DeleteFunc: func(obj any) { b.hub.publish(deleted, obj) },
		}); err != nil {
			return err
		}
	}
	go func() {
		if err := b.cache.Start(ctx); err != nil {
			benchkit.Logf("informers stopped: %v", err)
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	if !b.cache.WaitForCacheSync(syncCtx) {
		return fmt.Errorf("the bench's informers did not sync within %s", b.opts.timeout)
	}
	return nil
}

// --- events -----------------------------------------------------------------

type eventType string

const (
	added   eventType = "Added"
	updated eventType = "Updated"
	deleted eventType = "Deleted"
)

// event is one informer notification and the time the handler got it.
type event struct {
	at  time.Time
	typ eventType
	obj client.Object
}

// waiter receives the first event that matches.
type waiter struct {
	match func(event) bool
	ch    chan event
}

// hub hands informer events to the waiters registered for them.
type hub struct {
	mu      sync.Mutex
	waiters map[*waiter]struct{}
}

func newHub() *hub { return &hub{waiters: map[*waiter]struct{}{}} }

func (h *hub) publish(typ eventType, obj any) {
	at := time.Now()
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	e := event{at: at, typ: typ, obj: o}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waiters {
		if w.match(e) {
			w.ch <- e // buffered, and the waiter leaves the set now
			delete(h.waiters, w)
		}
	}
}

// expect registers a waiter; register it before the action it waits for.
func (h *hub) expect(match func(event) bool) *waiter {
	w := &waiter{match: match, ch: make(chan event, 1)}
	h.mu.Lock()
	h.waiters[w] = struct{}{}
	h.mu.Unlock()
	return w
}

func (h *hub) cancel(w *waiter) {
	h.mu.Lock()
	delete(h.waiters, w)
	h.mu.Unlock()
}

// await returns the waiter's event, or an error on timeout, cancellation or
// when the operator exits.
func (b *bench) await(ctx context.Context, w *waiter, timeout time.Duration, what string) (event, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var exited <-chan struct{}
	if b.op != nil {
		exited = b.op.exited
	}
	select {
	case e := <-w.ch:
		return e, nil
	case <-timer.C:
		b.hub.cancel(w)
		return event{}, fmt.Errorf("timed out after %s waiting for %s", timeout, what)
	case <-exited:
		b.hub.cancel(w)
		return event{}, fmt.Errorf("operator exited while waiting for %s: %v (log: %s)", what, b.op.err, b.op.logPath)
	case <-ctx.Done():
		b.hub.cancel(w)
		return event{}, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
}

// waitUntil re-evaluates cond on the bench's caches after every informer
// event until it holds. cond may explain why it does not hold yet; the
// explanation ends up in the timeout error.
func (b *bench) waitUntil(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		w := b.hub.expect(func(event) bool { return true })
		ok, why, err := cond(ctx)
		if err != nil || ok {
			b.hub.cancel(w)
			return err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			b.hub.cancel(w)
			remaining = 0
		}
		if _, err := b.await(ctx, w, remaining, what); err != nil {
			if why != "" {
				err = fmt.Errorf("%w (%s)", err, why)
			}
			return err
		}
	}
}

func isDeployment(name string, types ...eventType) func(event) bool {
	return func(e event) bool {
		_, ok := e.obj.(*appsv1.Deployment)
		return ok && e.obj.GetName() == name && slices.Contains(types, e.typ)
	}
}

func isCRD(name string, types ...eventType) func(event) bool {
	return func(e event) bool {
		_, ok := e.obj.(*apiextensionsv1.CustomResourceDefinition)
		return ok && e.obj.GetName() == name && slices.Contains(types, e.typ)
	}
}

// --- cycles -----------------------------------------------------------------

// waitSettled waits until the APIGateway is Ready for its generation and
// every controller Deployment is fully rolled out.
func (b *bench) waitSettled(ctx context.Context, timeout time.Duration) error {
	return b.waitUntil(ctx, timeout, "APIGateway Ready and both Deployments available", func(ctx context.Context) (bool, string, error) {
		gw := &operatorv1alpha1.APIGateway{}
		if err := b.cache.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
			return false, "APIGateway not found", client.IgnoreNotFound(err)
		}
		if gw.Status.State != operatorv1alpha1.StateReady || gw.Status.ObservedGeneration != gw.Generation {
			var why []string
			for _, c := range gw.Status.Controllers {
				why = append(why, fmt.Sprintf("%s %s: %s", c.Name, c.Phase, c.Message))
			}
			return false, fmt.Sprintf("APIGateway state %q, observedGeneration %d/%d; %s",
				gw.Status.State, gw.Status.ObservedGeneration, gw.Generation, strings.Join(why, "; ")), nil
		}
		for _, name := range controllerDeployments {
			d := &appsv1.Deployment{}
			if err := b.cache.Get(ctx, client.ObjectKey{Namespace: b.opts.namespace, Name: name}, d); err != nil {
				return false, "deployment " + name + " not found", client.IgnoreNotFound(err)
			}
			if !available(d) {
				return false, fmt.Sprintf("deployment %s: %d/%d available", name, d.Status.AvailableReplicas, replicas(d)), nil
			}
		}
		return true, "", nil
	})
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func available(d *appsv1.Deployment) bool {
	want := replicas(d)
	return d.DeletionTimestamp == nil && d.Status.ObservedGeneration >= d.Generation &&
		d.Status.Replicas == want && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want
}

// runCRDCycles measures (a) and (c): each cycle deletes the EnvoyFilter CRD
// and creates it again.
func (b *bench) runCRDCycles(ctx context.Context) (created, gone []time.Duration, err error) {
	benchkit.Logf("(a)+(c): %d cycles of deleting and re-creating CRD %s", b.opts.cycles, gatedCRD)
	for i := range b.opts.cycles {
		if err := b.waitSettled(ctx, b.opts.timeout); err != nil {
			return nil, nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		c, g, err := b.crdCycle(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		created, gone = append(created, c), append(gone, g)
		progress(i+1, b.opts.cycles)
	}
	return created, gone, nil
}

func (b *bench) crdCycle(ctx context.Context) (created, gone time.Duration, err error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := b.cache.Get(ctx, client.ObjectKey{Name: gatedCRD}, crd); err != nil {
		return 0, 0, fmt.Errorf("CRD %s: %w", gatedCRD, err)
	}
	oldUID := crd.UID
	if err := b.waitCRDServing(ctx, crd); err != nil {
		return 0, 0, err
	}

	// (c) CRD deleted -> Deployment gone.
	deploymentGone := b.hub.expect(isDeployment(gatedDeployment, deleted))
	crdGone := b.hub.expect(isCRD(gatedCRD, deleted))
	// Only for --verbose: when the bench saw the deletionTimestamp.
	terminating := b.hub.expect(func(e event) bool {
		return isCRD(gatedCRD, updated)(e) && e.obj.GetDeletionTimestamp() != nil
	})
	defer b.hub.cancel(terminating)
	call := time.Now()
	if err := b.c.Delete(ctx, crd, client.Preconditions{UID: &oldUID}); err != nil {
		b.hub.cancel(deploymentGone)
		b.hub.cancel(crdGone)
		return 0, 0, fmt.Errorf("delete CRD %s: %w", gatedCRD, err)
	}
	t0 := time.Now()
	e, err := b.await(ctx, deploymentGone, b.opts.timeout, "deployment "+gatedDeployment+" to be deleted after its CRD was")
	if err != nil {
		b.hub.cancel(crdGone)
		return 0, 0, err
	}
	gone = e.at.Sub(t0)
	removed, err := b.await(ctx, crdGone, b.opts.timeout, "CRD "+gatedCRD+" to be removed")
	if err != nil {
		return 0, 0, err
	}
	if b.opts.verbose {
		seen := "-"
		select {
		case term := <-terminating.ch:
			seen = msSince(t0, term.at)
		default:
		}
		benchkit.Logf("  (c) t0 %s delete returned (call took %s), deletionTimestamp seen %s, Deployment Deleted %s, CRD removed %s",
			stamp(t0), msSince(call, t0), seen, msSince(t0, e.at), msSince(t0, removed.at))
	}

	// (a) CRD Established -> Deployment created.
	isEstablished := b.hub.expect(func(e event) bool {
		c, ok := e.obj.(*apiextensionsv1.CustomResourceDefinition)
		return ok && c.Name == gatedCRD && c.UID != oldUID && e.typ != deleted && established(c)
	})
	deploymentAdded := b.hub.expect(isDeployment(gatedDeployment, added))
	created0 := time.Now()
	if err := b.c.Create(ctx, b.gatedSource.DeepCopy()); err != nil {
		b.hub.cancel(isEstablished)
		b.hub.cancel(deploymentAdded)
		return 0, 0, fmt.Errorf("create CRD %s: %w", gatedCRD, err)
	}
	est, err := b.await(ctx, isEstablished, b.opts.timeout, "CRD "+gatedCRD+" to be Established")
	if err != nil {
		b.hub.cancel(deploymentAdded)
		return 0, 0, err
	}
	add, err := b.await(ctx, deploymentAdded, b.opts.timeout, "deployment "+gatedDeployment+" to be created after its CRD was")
	if err != nil {
		return 0, 0, err
	}
	if b.opts.verbose {
		benchkit.Logf("  (a) t0 %s Established seen, Deployment Added %s (CRD created %s before t0)",
			stamp(est.at), msSince(est.at, add.at), msSince(created0, est.at))
	}
	return add.at.Sub(est.at), gone, nil
}

// waitCRDServing lists the CRD's resources until the API server serves
// them. The API server builds a CRD's storage (and its watch cache) lazily,
// on the first request; a CRD deleted before that happened fails its
// finalizer's list with "storage is (re)initializing", and the finalizer
// then backs off exponentially: removal of the CRD stalls for seconds to
// minutes. On a real cluster istiod watches EnvoyFilters, so the storage is
// always built; this list does the same for the bench. It is not part of
// any measurement.
func (b *bench) waitCRDServing(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	var version string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			version = v.Name
		}
	}
	path := fmt.Sprintf("/apis/%s/%s/%s", crd.Spec.Group, version, crd.Spec.Names.Plural)
	deadline := time.Now().Add(b.opts.timeout)
	for {
		// client-go itself retries the 429 the API server sends while the
		// watch cache initializes.
		err := b.rest.Get().AbsPath(path).Param("limit", "1").Do(ctx).Error()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("list %s: %w", path, err)
		}
		if err := b.sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// runSelfHealCycles measures (b): each cycle deletes the apirule-controller
// Deployment.
func (b *bench) runSelfHealCycles(ctx context.Context) ([]time.Duration, error) {
	benchkit.Logf("(b): %d cycles of deleting deployment %s", b.opts.cycles, healedDeployment)
	var out []time.Duration
	for i := range b.opts.cycles {
		if err := b.waitSettled(ctx, b.opts.timeout); err != nil {
			return nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		d := &appsv1.Deployment{}
		if err := b.cache.Get(ctx, client.ObjectKey{Namespace: b.opts.namespace, Name: healedDeployment}, d); err != nil {
			return nil, fmt.Errorf("cycle %d: deployment %s: %w", i+1, healedDeployment, err)
		}
		oldUID := d.UID
		back := b.hub.expect(func(e event) bool {
			return isDeployment(healedDeployment, added, updated)(e) && e.obj.GetUID() != oldUID
		})
		// Only for --verbose: when the bench saw the old one go.
		oldGone := b.hub.expect(isDeployment(healedDeployment, deleted))
		call := time.Now()
		if err := b.c.Delete(ctx, d, client.Preconditions{UID: &oldUID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			b.hub.cancel(back)
			b.hub.cancel(oldGone)
			return nil, fmt.Errorf("cycle %d: delete deployment %s: %w", i+1, healedDeployment, err)
		}
		t0 := time.Now()
		e, err := b.await(ctx, back, b.opts.timeout, "deployment "+healedDeployment+" to be recreated")
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		out = append(out, e.at.Sub(t0))
		b.hub.cancel(oldGone)
		if b.opts.verbose {
			seen := "-"
			select {
			case g := <-oldGone.ch:
				seen = msSince(t0, g.at)
			default:
			}
			benchkit.Logf("  (b) t0 %s delete returned (call took %s), Deleted seen %s, new Deployment Added %s",
				stamp(t0), msSince(call, t0), seen, msSince(t0, e.at))
		}
		progress(i+1, b.opts.cycles)
	}
	return out, nil
}

func progress(done, total int) {
	if done == total || done%10 == 0 {
		benchkit.Logf("  %d/%d cycles", done, total)
	}
}

// writeCount is the operator's non-GET requests, by method.
type writeCount map[string]float64

func (w writeCount) total() float64 {
	var sum float64
	for _, v := range w {
		sum += v
	}
	return sum
}

// steadyWrites measures (d): the operator's API writes over --steady once
// nothing changes any more.
func (b *bench) steadyWrites(ctx context.Context) (writeCount, error) {
	benchkit.Logf("(d): waiting for quiescence")
	if err := b.waitSettled(ctx, 4*b.opts.timeout); err != nil {
		return nil, err
	}
	last, err := b.waitQuiet(ctx, quietFor)
	if err != nil {
		return nil, err
	}

	benchkit.Logf("(d): counting the operator's API writes for %s", b.opts.steady)
	if err := b.sleep(ctx, b.opts.steady); err != nil {
		return nil, err
	}
	end, err := b.op.writes(ctx)
	if err != nil {
		return nil, err
	}
	delta := writeCount{}
	for method, v := range end {
		if d := v - last[method]; d != 0 {
			delta[method] = d
		}
	}
	return delta, nil
}

// waitQuiet waits until the operator's write counter has not moved for d,
// and returns the counter. Status writes and Events of the last rollout
// trail the Deployments' availability. It samples /metrics, which is fine:
// it only decides when a measurement starts.
func (b *bench) waitQuiet(ctx context.Context, d time.Duration) (writeCount, error) {
	deadline := time.Now().Add(4*b.opts.timeout + d)
	last, err := b.op.writes(ctx)
	if err != nil {
		return nil, err
	}
	quietSince := time.Now()
	for time.Since(quietSince) < d {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the operator kept writing for %s after everything was Ready (log: %s)", 4*b.opts.timeout, b.op.logPath)
		}
		if err := b.sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
		now, err := b.op.writes(ctx)
		if err != nil {
			return nil, err
		}
		if now.total() != last.total() {
			quietSince = time.Now()
		}
		last = now
	}
	return last, nil
}

// sleep waits, but returns early when the run is cancelled or the operator
// exits.
func (b *bench) sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-b.op.exited:
		return fmt.Errorf("operator exited: %v (log: %s)", b.op.err, b.op.logPath)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// describe names what was measured, for the table's header.
func (b *bench) describe(ctx context.Context) (string, error) {
	version, err := exec.CommandContext(ctx, b.opts.operator, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", b.opts.operator, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(b.cfg)
	if err != nil {
		return "", err
	}
	server, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	where := "cluster " + b.opts.cluster
	if b.opts.kubeconfig != "" {
		where = b.opts.kubeconfig
	}
	return fmt.Sprintf("portico-operator %s on %s (kube-apiserver %s, kwok), %d CPUs, %s",
		strings.TrimSpace(string(version)), where, server.GitVersion, goruntime.NumCPU(), time.Now().UTC().Format(time.RFC3339)), nil
}

// --- operator process ------------------------------------------------------

type operatorProcess struct {
	cmd        *exec.Cmd
	cancel     context.CancelFunc
	exited     chan struct{}
	err        error // set before exited is closed
	logPath    string
	metricsURL string
	readyURL   string
}

// startOperator runs the operator binary against the cluster, with metrics
// and probes on free loopback ports and its output in a log file.
func startOperator(o options, kubeconfig string) (*operatorProcess, error) {
	metricsAddr, err := benchkit.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	probeAddr, err := benchkit.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp("", "portico-bench-operator-*.log")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--namespace", o.namespace,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--leader-elect=false",
		"--zap-time-encoding=rfc3339nano",
	}, o.operatorFlags...)
	cmd := exec.CommandContext(ctx, o.operator, args...)
	// Stop with SIGTERM (the operator shuts down cleanly); SIGKILL only if
	// it has not exited 10 s later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		cancel()
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", o.operator, err)
	}
	p := &operatorProcess{
		cmd: cmd, cancel: cancel, exited: make(chan struct{}), logPath: logFile.Name(),
		metricsURL: "http://" + metricsAddr + "/metrics",
		readyURL:   "http://" + probeAddr + "/readyz",
	}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM and waits for the operator to exit.
func (p *operatorProcess) stop() error {
	select {
	case <-p.exited:
		// It exited on its own (or with the terminal's Ctrl-C).
	default:
		benchkit.Logf("stopping the operator (SIGTERM)")
		p.cancel()
		<-p.exited
	}
	p.cancel()
	// After a SIGTERM a clean exit reads as context.Canceled (exec.Cmd's
	// convention); a failing one as an *exec.ExitError.
	if p.err != nil && !errors.Is(p.err, context.Canceled) {
		return fmt.Errorf("operator: %w (log: %s)", p.err, p.logPath)
	}
	return nil
}

// waitReady waits for the operator's /readyz (caches synced).
func (p *operatorProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	benchkit.Logf("waiting for the operator's /readyz")
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.readyURL, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator not ready after %s (log: %s)", timeout, p.logPath)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("operator exited before it was ready: %v (log: %s)", p.err, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writes reads rest_client_requests_total{method!="GET"} from the
// operator's /metrics, summed over code and host, by method.
func (p *operatorProcess) writes(ctx context.Context) (writeCount, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read operator metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read operator metrics: %s", resp.Status)
	}
	out := writeCount{}
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		method, value, ok := parseRequestsTotal(sc.Text())
		if !ok {
			continue
		}
		found = true
		if method != http.MethodGet {
			out[method] += value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read operator metrics: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("operator metrics at %s have no rest_client_requests_total", p.metricsURL)
	}
	return out, nil
}

// parseRequestsTotal parses one sample line of the text exposition format,
// e.g. rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 4
func parseRequestsTotal(line string) (method string, value float64, ok bool) {
	rest, found := strings.CutPrefix(line, "rest_client_requests_total{")
	if !found {
		return "", 0, false
	}
	labels, sample, found := strings.Cut(rest, "} ")
	if !found {
		return "", 0, false
	}
	for _, l := range strings.Split(labels, ",") {
		if v, found := strings.CutPrefix(l, `method="`); found {
			method = strings.TrimSuffix(v, `"`)
		}
	}
	fields := strings.Fields(sample)
	if method == "" || len(fields) == 0 {
		return "", 0, false
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", 0, false
	}
	return method, value, true
}

// --- report -----------------------------------------------------------------

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// msSince formats the time from t0 to t, for --verbose timelines.
func msSince(t0, t time.Time) string { return ms(t.Sub(t0)) }

// stamp formats a time like the operator's log (UTC), for --verbose.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func printTable(w io.Writer, header string, o options, created, recreated, gone []time.Duration, writes writeCount) {
	rows := [][]string{{"metric", "p50", "p99", "max", "n", "target", "pass"}}
	for _, m := range []struct {
		name    string
		samples []time.Duration
	}{
		{"(a) CRD Established -> Deployment created", created},
		{"(b) Deployment deleted -> recreated", recreated},
		{"(c) CRD deleted -> Deployment gone", gone},
	} {
		s := slices.Clone(m.samples)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		p99 := percentile(s, 0.99)
		rows = append(rows, []string{m.name, ms(percentile(s, 0.50)), ms(p99), ms(s[len(s)-1]),
			strconv.Itoa(len(s)), "p99 < " + ms(latencyTarget), passFail(p99 < latencyTarget)})
	}
	total := writes.total()
	rows = append(rows, []string{fmt.Sprintf("(d) API writes in %s of steady state", o.steady), "-", "-",
		strconv.FormatFloat(total, 'f', -1, 64), "1", "0", passFail(total == 0)})

	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\n%s\n\n", header)
	for i, r := range rows {
		for j, c := range r {
			if j > 0 {
				buf.WriteString(" | ")
			}
			if j == 0 || j == len(r)-1 {
				fmt.Fprintf(&buf, "%-*s", widths[j], c)
			} else {
				fmt.Fprintf(&buf, "%*s", widths[j], c)
			}
		}
		buf.WriteString("\n")
		if i == 0 {
			for j, width := range widths {
				if j > 0 {
					buf.WriteString("-|-")
				}
				buf.WriteString(strings.Repeat("-", width))
			}
			buf.WriteString("\n")
		}
	}
	if total != 0 {
		methods := make([]string, 0, len(writes))
		for m := range writes {
			methods = append(methods, fmt.Sprintf("%s %g", m, writes[m]))
		}
		sort.Strings(methods)
		fmt.Fprintf(&buf, "\n(d) writes by method: %s\n", strings.Join(methods, ", "))
	}
	_, _ = w.Write(buf.Bytes())
}
