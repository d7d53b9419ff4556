// Command controllers is `make bench-controllers`: it measures how long the
// apirule and ratelimit controllers take to converge a large number of
// objects on a real, local control plane, and how much memory they need.
//
// It brings up the offline kwok cluster "portico-bench-ctrl"
// (hack/cluster.sh), installs the gateway.portico.dev CRDs and the real
// Istio CRDs of the istio.io/api module, removes what an earlier run left,
// and creates --namespaces namespaces. Then, one controller at a time:
//
//	(1) apirule. Creates --gateways Istio Gateways in istio-system (each
//	    with its own selector) and --apirules headless Services with pod
//	    selectors, spread over the namespaces, waits until
//	    kube-controller-manager has written their Endpoints and
//	    EndpointSlices (so that it does not load the API server during the
//	    measurement), then starts bin/apirule-controller and waits for its
//	    /readyz. t0: just before the first of --apirules APIRules is
//	    created (--workers at a time, every other one with a JWT rule, so
//	    a RequestAuthentication too).
//	    Converged: every APIRule has Ready=True with observedGeneration ==
//	    generation (in the condition and the status), and every APIRule's
//	    VirtualService, AuthorizationPolicy and, for JWT rules,
//	    RequestAuthentication exists.
//	(2) ratelimit. Starts bin/ratelimit-controller (the apirule controller
//	    keeps running) and waits for its /readyz. t0: just before the first
//	    of --ratelimits RateLimits is created. Per gateway, round-robin: two
//	    Gateway-kind limits in istio-system (same scope: the older one is
//	    Enforced, the other Conflicted), one naming a missing APIRule
//	    (TargetNotFound) and the rest naming distinct APIRules of that
//	    gateway (Enforced; once its APIRules are used up they repeat, and
//	    the repeats are Conflicted). Converged: every RateLimit has a Ready
//	    condition with observedGeneration == generation and the reason its
//	    target calls for, every scope has exactly one Enforced limit, and
//	    there is exactly one managed EnvoyFilter per gateway workload, with
//	    one config patch per enforced scope (so its content is final too).
//
// Both are observed with the bench's own informers: the time of the event
// that completes the condition is the convergence time; nothing is polled.
// "create" is t0 until the last create call returned. Once converged, the
// bench waits until the controller's reconcile counter stands still (3 s)
// and reports controller_runtime_reconcile_total from its /metrics. Peak RSS
// is VmHWM of /proc/<pid>/status (the kernel's high-water mark, exact);
// peak heap is the largest go_memstats_heap_inuse_bytes sampled from
// /metrics every --sample (it can miss short spikes). The apirule numbers
// are taken at the end of (1), the ratelimit numbers at the end of (2).
//
// Services are headless (clusterIP: None): the kwok cluster's service CIDR is
// kube-apiserver's default 10.0.0.0/24, too small for 1,000 ClusterIPs, and
// the controller only reads a Service's selector.
//
// It prints one table to stdout (progress goes to stderr), followed by notes
// per controller: the CPU time it, the bench, kube-apiserver and etcd used
// until convergence and how busy the machine's CPUs were (other load on the
// machine skews every number: check that line first), its reconciles by
// result and its API requests by verb. The controllers
// are stopped with SIGTERM at the end and the bench's objects are deleted
// (--keep leaves them); the cluster is left up for the next run unless
// --down is given; remove it with `hack/cluster.sh down portico-bench-ctrl`.
//
// Usage (from the repository root; `make bench-controllers` builds the
// controllers first):
//
//	go run ./hack/bench/controllers [--apirules 1000] [--ratelimits 1000] [--gateways 50] [--down]
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
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

const (
	fieldOwner = "portico-bench"
	// benchLabel marks every object (and namespace) the bench creates, so
	// the next run can remove what an interrupted one left.
	benchLabel      = "portico.dev/bench"
	benchLabelValue = "controllers"
	gatewayNS       = "istio-system"
	// Labels of the EnvoyFilters ratelimit-controller writes (its topology
	// package is internal to it).
	efManagedByLabel = "app.kubernetes.io/managed-by"
	efManagedBy      = "ratelimit-controller"
	// gatewaySelectorKey is the label every bench Gateway selects its
	// workload by, each with its own value.
	gatewaySelectorKey = "istio"
	// rulesPerAPIRule is the number of rules (so Envoy routes) of every
	// APIRule the bench creates.
	rulesPerAPIRule = 2
	// quietFor is how long a controller's reconcile counter must stand still
	// after convergence before its totals are read.
	quietFor = 3 * time.Second
)

type options struct {
	apiRules   int
	rateLimits int
	gateways   int
	namespaces int
	workers    int
	sample     time.Duration
	timeout    time.Duration
	cluster    string
	kubeconfig string
	binDir     string
	logLevel   string
	down       bool
	keep       bool
}

func main() {
	o := options{}
	// Not flag.CommandLine: controller-runtime registers --kubeconfig there.
	fs := flag.NewFlagSet("bench-controllers", flag.ExitOnError)
	fs.IntVar(&o.apiRules, "apirules", 1000, "APIRules (and Services) to create in (1)")
	fs.IntVar(&o.rateLimits, "ratelimits", 1000, "RateLimits to create in (2)")
	fs.IntVar(&o.gateways, "gateways", 50, "Istio Gateways (each its own workload) the APIRules and RateLimits spread over")
	fs.IntVar(&o.namespaces, "namespaces", 10, "namespaces the Services, APIRules and APIRule-kind RateLimits spread over")
	fs.IntVar(&o.workers, "workers", 16, "concurrent create calls")
	fs.DurationVar(&o.sample, "sample", 250*time.Millisecond, "interval of the controllers' heap samples (from /metrics)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "limit for each convergence and for setup waits")
	fs.StringVar(&o.cluster, "cluster", "portico-bench-ctrl", "name of the kwok cluster hack/cluster.sh brings up")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "use this cluster instead of bringing one up with hack/cluster.sh (--down is ignored)")
	fs.StringVar(&o.binDir, "bin", "bin", "directory of apirule-controller and ratelimit-controller (build them with `make build`)")
	fs.StringVar(&o.logLevel, "log-level", "info", "--log-level of the controllers (their logs go to temporary files)")
	fs.BoolVar(&o.down, "down", false, "delete the cluster at the end (default: leave it up for the next run)")
	fs.BoolVar(&o.keep, "keep", false, "leave the bench's objects in the cluster at the end (the next run removes them)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./hack/bench/controllers [flags]\n\n"+
			"Measures how long apirule-controller and ratelimit-controller take to converge many objects\n"+
			"on a local kwok cluster, and their peak memory.\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if fs.NArg() > 0 || o.apiRules < 1 || o.rateLimits < 1 || o.gateways < 1 || o.namespaces < 1 ||
		o.workers < 1 || o.sample <= 0 || o.timeout <= 0 {
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

// run does the whole bench; errors mean the run broke.
func run(ctx context.Context, o options) (retErr error) {
	root, err := benchkit.RepoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.binDir) {
		o.binDir = filepath.Join(root, o.binDir)
	}
	for _, name := range []string{"apirule", "ratelimit"} {
		if _, err := os.Stat(filepath.Join(o.binDir, name+"-controller")); err != nil {
			return fmt.Errorf("controller binary: %w (run `make build` first)", err)
		}
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
	// Creation speed must be the API server's, not client-go's default
	// limiter (5 QPS).
	cfg.QPS, cfg.Burst = 2000, 4000

	b := &bench{opts: o, root: root, kubeconfig: kubeconfig, cfg: cfg, plan: newPlan(o)}
	if b.c, err = client.New(cfg, client.Options{Scheme: scheme()}); err != nil {
		return err
	}
	if err := b.installCRDs(ctx); err != nil {
		return err
	}
	if err := b.cleanup(ctx); err != nil {
		return err
	}
	clusterGoes := o.down && o.kubeconfig == ""
	if !o.keep && !clusterGoes {
		// Registered before the controllers start, so it runs after they
		// stopped. A fresh context: the run's may be cancelled.
		defer func() {
			cleanupCtx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			retErr = errors.Join(retErr, b.cleanup(cleanupCtx))
		}()
	}
	if err := b.createNamespaces(ctx); err != nil {
		return err
	}
	stopInformers, err := b.startInformers(ctx)
	if err != nil {
		return err
	}
	// Before the cleanup: its deletions need not reach the bench.
	defer stopInformers()
	if err := b.createFixtures(ctx); err != nil {
		return err
	}

	apirule, err := b.startController(ctx, "apirule")
	if apirule != nil {
		defer func() { retErr = errors.Join(retErr, apirule.stop()) }()
	}
	if err != nil {
		return err
	}
	ruleResult, err := b.phaseAPIRules(ctx, apirule)
	if err != nil {
		return err
	}

	ratelimit, err := b.startController(ctx, "ratelimit")
	if ratelimit != nil {
		defer func() { retErr = errors.Join(retErr, ratelimit.stop()) }()
	}
	if err != nil {
		return err
	}
	limitResult, err := b.phaseRateLimits(ctx, ratelimit)
	if err != nil {
		return err
	}

	header, err := b.describe(ctx)
	if err != nil {
		return err
	}
	printTable(os.Stdout, header, ruleResult, limitResult)
	return nil
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, apiextensionsv1.AddToScheme, gatewayv1alpha1.AddToScheme,
		networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, securityv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// --- plan -------------------------------------------------------------------

// scopeKind is what a RateLimit's verdict should be.
type scopeKind int

const (
	// inGroup: one of the limits claiming the same scope; exactly one of
	// them is Enforced, the others Conflicted.
	inGroup scopeKind = iota
	// targetMissing: the target does not exist (TargetNotFound).
	targetMissing
)

type limitExpectation struct {
	kind  scopeKind
	group string
}

// plan is every object the bench creates and what the controllers should
// make of them.
type plan struct {
	namespaces []string
	gateways   []*networkingv1.Gateway
	services   []*corev1.Service
	apiRules   []*gatewayv1alpha1.APIRule
	jwt        map[string]bool // APIRule key -> has a JWT rule
	rateLimits []*gatewayv1alpha1.RateLimit
	limits     map[string]limitExpectation // RateLimit key -> expectation
	groups     int
	// envoyFilters maps a gateway's selector value to the number of config
	// patches its workload's EnvoyFilter must have.
	envoyFilters map[string]int
}

func key(namespace, name string) string { return namespace + "/" + name }

func benchLabels() map[string]string { return map[string]string{benchLabel: benchLabelValue} }

func newPlan(o options) *plan {
	p := &plan{jwt: map[string]bool{}, limits: map[string]limitExpectation{}, envoyFilters: map[string]int{}}
	for i := range o.namespaces {
		p.namespaces = append(p.namespaces, fmt.Sprintf("bench-ctrl-%02d", i))
	}
	gatewayName := func(g int) string { return fmt.Sprintf("bench-gw-%02d", g) }
	for g := range o.gateways {
		gw := &networkingv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: gatewayName(g), Namespace: gatewayNS, Labels: benchLabels()},
			Spec: networkingapi.Gateway{
				Selector: map[string]string{gatewaySelectorKey: gatewayName(g)},
				Servers: []*networkingapi.Server{{
					Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
				}},
			},
		}
		p.gateways = append(p.gateways, gw)
	}

	for i := range o.apiRules {
		ns := p.namespaces[i%o.namespaces]
		svc := fmt.Sprintf("svc-%04d", i)
		p.services = append(p.services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: ns, Labels: benchLabels()},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  map[string]string{"app": svc},
				Ports:     []corev1.ServicePort{{Name: "http", Port: 8080}},
			},
		})
		name := fmt.Sprintf("api-%04d", i)
		orders := gatewayv1alpha1.Rule{Path: "/orders/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET", "POST"}, NoAuth: ptr.To(true)}
		withJWT := i%2 == 1
		if withJWT {
			orders.NoAuth = nil
			orders.JWT = &gatewayv1alpha1.JWTAuthentication{
				Issuer: "https://issuer.example.com", JWKSURI: "https://issuer.example.com/.well-known/jwks.json",
				Audiences: []string{"orders"}, RequiredScopes: []string{"orders:read"},
			}
		}
		rules := []gatewayv1alpha1.Rule{
			orders,
			{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
		}
		p.apiRules = append(p.apiRules, &gatewayv1alpha1.APIRule{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: benchLabels()},
			Spec: gatewayv1alpha1.APIRuleSpec{
				Hosts:   []gatewayv1alpha1.Hostname{gatewayv1alpha1.Hostname(name + ".bench.example.com")},
				Gateway: gatewayNS + "/" + gatewayName(i%o.gateways),
				Service: &gatewayv1alpha1.ServiceReference{Name: svc, Port: 8080},
				Timeout: &metav1.Duration{Duration: 15 * time.Second},
				Rules:   rules,
			},
		})
		p.jwt[key(ns, name)] = withJWT
	}
	if len(p.apiRules[0].Spec.Rules) != rulesPerAPIRule {
		panic("rulesPerAPIRule is out of date")
	}

	// APIRules by gateway index, in creation order.
	byGateway := make([][]*gatewayv1alpha1.APIRule, o.gateways)
	for i, r := range p.apiRules {
		byGateway[i%o.gateways] = append(byGateway[i%o.gateways], r)
	}
	bucket := gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}}
	groups := map[string]bool{}
	gatewayClaim := make([]bool, o.gateways)
	ruleClaims := make([]map[string]bool, o.gateways)
	for i := range o.rateLimits {
		g, slot := i%o.gateways, i/o.gateways
		rl := &gatewayv1alpha1.RateLimit{
			ObjectMeta: metav1.ObjectMeta{Labels: benchLabels()},
			Spec:       gatewayv1alpha1.RateLimitSpec{Local: bucket},
		}
		var exp limitExpectation
		switch {
		case slot < 2:
			// Two limits for the whole gateway: one wins, one is Conflicted.
			rl.Namespace, rl.Name = gatewayNS, fmt.Sprintf("gw-%02d-%d", g, slot)
			rl.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetGateway, Name: gatewayName(g)}
			rl.Spec.Descriptors = []gatewayv1alpha1.Descriptor{{
				Header: &gatewayv1alpha1.HeaderMatch{Name: "x-tenant", Value: "bench"},
				Bucket: &gatewayv1alpha1.TokenBucket{MaxTokens: 10, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
			}}
			exp = limitExpectation{kind: inGroup, group: "gateway:" + gatewayName(g)}
			gatewayClaim[g] = true
		case slot == 2 || len(byGateway[g]) == 0:
			rl.Namespace, rl.Name = p.namespaces[i%o.namespaces], fmt.Sprintf("rl-%04d", i)
			rl.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: fmt.Sprintf("missing-%04d", i)}
			exp = limitExpectation{kind: targetMissing}
		default:
			target := byGateway[g][(slot-3)%len(byGateway[g])]
			rl.Namespace, rl.Name = target.Namespace, fmt.Sprintf("rl-%04d", i)
			rl.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: target.Name}
			exp = limitExpectation{kind: inGroup, group: "apirule:" + key(target.Namespace, target.Name)}
			if ruleClaims[g] == nil {
				ruleClaims[g] = map[string]bool{}
			}
			ruleClaims[g][target.Name] = true
		}
		if exp.kind == inGroup {
			groups[exp.group] = true
		}
		p.rateLimits = append(p.rateLimits, rl)
		p.limits[key(rl.Namespace, rl.Name)] = exp
	}
	p.groups = len(groups)
	// One EnvoyFilter per workload with any enforced scope: the listener
	// filter, the virtual-host descriptors of the gateway-wide limit and one
	// route patch per rule of every limited APIRule.
	for g := range o.gateways {
		patches := 1 + rulesPerAPIRule*len(ruleClaims[g])
		if gatewayClaim[g] {
			patches++ // the descriptors' virtual-host patch
		}
		if gatewayClaim[g] || len(ruleClaims[g]) > 0 {
			p.envoyFilters[gatewayName(g)] = patches
		}
	}
	return p
}

// --- bench ------------------------------------------------------------------

// bench holds the clients, the informers and the plan.
type bench struct {
	opts       options
	root       string
	kubeconfig string
	cfg        *rest.Config
	// c writes to and reads from the API server directly.
	c     client.Client
	cache cache.Cache
	plan  *plan

	mu sync.Mutex
	tr tracker // the running phase's, fed by every informer event
}

// installCRDs applies the project's and Istio's CRDs and waits until they
// are Established.
func (b *bench) installCRDs(ctx context.Context) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	files, err := filepath.Glob(filepath.Join(testenv.ProjectCRDPaths()[0], "gateway.portico.dev_*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		got, err := testenv.ReadCRDs(f)
		if err != nil {
			return err
		}
		crds = append(crds, got...)
	}
	istio, err := testenv.IstioCRDs()
	if err != nil {
		return err
	}
	crds = append(crds, istio...)
	benchkit.Logf("applying %d CRDs", len(crds))
	for _, crd := range crds {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: raw}
		u.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
		u.SetKind("CustomResourceDefinition")
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := b.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}
	// Setup only, so it polls.
	for _, crd := range crds {
		if err := b.poll(ctx, "CRD "+crd.Name+" Established", func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := b.c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if got.DeletionTimestamp != nil {
				return false, fmt.Errorf("CRD %s is being deleted; retry when it is gone", crd.Name)
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// poll checks cond every 200ms until it holds; setup and cleanup only.
func (b *bench) poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(b.opts.timeout)
	for {
		ok, err := cond(ctx)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", b.opts.timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cleanup removes every object of an earlier run: the bench's namespaces
// (with everything in them) and its objects in istio-system, including the
// EnvoyFilters ratelimit-controller wrote there.
func (b *bench) cleanup(ctx context.Context) error {
	var nss corev1.NamespaceList
	if err := b.c.List(ctx, &nss, client.MatchingLabels(benchLabels())); err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	sel := client.MatchingLabels(benchLabels())
	inGatewayNS := client.InNamespace(gatewayNS)
	var errs []error
	for _, obj := range []client.Object{&gatewayv1alpha1.RateLimit{}, &networkingv1.Gateway{}} {
		errs = append(errs, ignoreGone(b.c.DeleteAllOf(ctx, obj, inGatewayNS, sel)))
	}
	errs = append(errs, ignoreGone(b.c.DeleteAllOf(ctx, &networkingv1alpha3.EnvoyFilter{}, inGatewayNS,
		client.MatchingLabels{efManagedByLabel: efManagedBy})))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete the bench's objects in %s: %w", gatewayNS, err)
	}
	if len(nss.Items) == 0 {
		return nil
	}
	benchkit.Logf("deleting the bench's %d namespaces", len(nss.Items))
	for i := range nss.Items {
		if err := b.c.Delete(ctx, &nss.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete namespace %s: %w", nss.Items[i].Name, err)
		}
	}
	return b.poll(ctx, "the bench's namespaces to be deleted", func(ctx context.Context) (bool, error) {
		var left corev1.NamespaceList
		if err := b.c.List(ctx, &left, client.MatchingLabels(benchLabels())); err != nil {
			return false, err
		}
		return len(left.Items) == 0, nil
	})
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

func (b *bench) createNamespaces(ctx context.Context) error {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gatewayNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", gatewayNS, err)
	}
	for _, ns := range b.plan.namespaces {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: benchLabels()}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// createFixtures creates what the APIRules refer to: the Gateways and the
// Services.
func (b *bench) createFixtures(ctx context.Context) error {
	benchkit.Logf("creating %d Gateways and %d Services", len(b.plan.gateways), len(b.plan.services))
	var objs []client.Object
	for _, gw := range b.plan.gateways {
		objs = append(objs, gw)
	}
	for _, svc := range b.plan.services {
		objs = append(objs, svc)
	}
	if _, err := b.createAll(ctx, objs); err != nil {
		return err
	}
	return b.waitEndpoints(ctx)
}

// waitEndpoints waits until kube-controller-manager has written the
// Endpoints and EndpointSlice of every Service. It writes them at its
// client's default 20 QPS, so for 1,000 Services that takes over a minute,
// and it must not compete with the controllers for the API server during a
// measurement: on a real cluster the Services have long been there. Setup
// only, so it polls.
func (b *bench) waitEndpoints(ctx context.Context) error {
	want := len(b.plan.services)
	benchkit.Logf("waiting for kube-controller-manager to write the Endpoints and EndpointSlices of %d Services", want)
	count := func(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) (int, error) {
		n := 0
		for _, ns := range b.plan.namespaces {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk)
			if err := b.c.List(ctx, list, append([]client.ListOption{client.InNamespace(ns)}, opts...)...); err != nil {
				return 0, err
			}
			n += len(list.Items)
		}
		return n, nil
	}
	last := time.Now()
	return b.poll(ctx, "the Services' Endpoints and EndpointSlices", func(ctx context.Context) (bool, error) {
		endpoints, err := count(ctx, corev1.SchemeGroupVersion.WithKind("EndpointsList"))
		if err != nil {
			return false, err
		}
		endpointSlices, err := count(ctx, discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"), client.HasLabels{discoveryv1.LabelServiceName})
		if err != nil {
			return false, err
		}
		if time.Since(last) > 10*time.Second {
			benchkit.Logf("  Endpoints %d/%d, EndpointSlices %d/%d", endpoints, want, endpointSlices, want)
			last = time.Now()
		}
		return endpoints >= want && endpointSlices >= want, nil
	})
}

// createAll creates objs with --workers concurrent calls; it returns how
// long that took from the first call on.
func (b *bench) createAll(ctx context.Context, objs []client.Object) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(b.opts.workers, len(objs)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(objs) {
					return
				}
				obj := objs[i].DeepCopyObject().(client.Object)
				if err := b.c.Create(ctx, obj); err != nil {
					cancel(fmt.Errorf("create %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err))
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return took, nil
}

// --- informers and trackers -------------------------------------------------

type eventType string

const (
	added   eventType = "Added"
	updated eventType = "Updated"
	deleted eventType = "Deleted"
)

// tracker decides convergence from informer events, incrementally: every
// event updates a few counters under bench.mu.
type tracker interface {
	observe(kind string, typ eventType, obj client.Object, at time.Time)
	progress() string
	completion() *completion
}

// completion is closed (once) when a tracker's condition first holds.
type completion struct {
	ch chan struct{}
	at time.Time
}

func newCompletion() *completion { return &completion{ch: make(chan struct{})} }

func (c *completion) complete(at time.Time) {
	select {
	case <-c.ch:
	default:
		c.at = at
		close(c.ch)
	}
}

func (b *bench) setTracker(t tracker) {
	b.mu.Lock()
	b.tr = t
	b.mu.Unlock()
}

func (b *bench) handle(kind string, typ eventType, obj any) {
	at := time.Now()
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tr != nil {
		b.tr.observe(kind, typ, o, at)
	}
}

func (b *bench) progress() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tr == nil {
		return ""
	}
	return b.tr.progress()
}

func metadataOnly(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// Kinds the trackers are told about.
const (
	kindAPIRule               = "APIRule"
	kindVirtualService        = "VirtualService"
	kindAuthorizationPolicy   = "AuthorizationPolicy"
	kindRequestAuthentication = "RequestAuthentication"
	kindRateLimit             = "RateLimit"
	kindEnvoyFilter           = "EnvoyFilter"
)

// startInformers watches what the trackers look at. Istio objects whose
// existence is all that matters are watched as metadata only. The returned
// function stops the informers and waits for them.
func (b *bench) startInformers(ctx context.Context) (func(), error) {
	var err error
	b.cache, err = cache.New(b.cfg, cache.Options{Scheme: scheme(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		kind string
		obj  client.Object
	}{
		{kindAPIRule, &gatewayv1alpha1.APIRule{}},
		{kindVirtualService, metadataOnly(networkingv1.SchemeGroupVersion.WithKind("VirtualService"))},
		{kindAuthorizationPolicy, metadataOnly(securityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy"))},
		{kindRequestAuthentication, metadataOnly(securityv1.SchemeGroupVersion.WithKind("RequestAuthentication"))},
		{kindRateLimit, &gatewayv1alpha1.RateLimit{}},
		{kindEnvoyFilter, &networkingv1alpha3.EnvoyFilter{}},
	} {
		inf, err := b.cache.GetInformer(ctx, w.obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("informer for %s: %w", w.kind, err)
		}
		kind := w.kind
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { b.handle(kind, added, obj) },
			UpdateFunc: func(_, obj any) { b.handle(kind, updated, obj) },
			DeleteFunc: func(obj any) { b.handle(kind, deleted, obj) },
		}); err != nil {
			return nil, err
		}
	}
	cacheCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := b.cache.Start(cacheCtx); err != nil {
			benchkit.Logf("informers stopped: %v", err)
		}
	}()
	stopAndWait := func() {
		stop()
		<-stopped
	}
	syncCtx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	if !b.cache.WaitForCacheSync(syncCtx) {
		stopAndWait()
		return nil, errors.New("the bench's informers did not sync")
	}
	return stopAndWait, nil
}

// apiRuleTracker: every APIRule Ready for its generation and its Istio
// objects present.
type apiRuleTracker struct {
	done  *completion
	jwt   map[string]bool
	ready map[string]bool
	// present Istio objects by kind, of expected APIRules only
	objects map[string]map[string]bool
	wantRA  int
}

func newAPIRuleTracker(p *plan) *apiRuleTracker {
	t := &apiRuleTracker{done: newCompletion(), jwt: p.jwt, ready: map[string]bool{}, objects: map[string]map[string]bool{
		kindVirtualService: {}, kindAuthorizationPolicy: {}, kindRequestAuthentication: {},
	}}
	for _, withJWT := range p.jwt {
		if withJWT {
			t.wantRA++
		}
	}
	return t
}

func (t *apiRuleTracker) completion() *completion { return t.done }

func setMember(set map[string]bool, k string, in bool) {
	if in {
		set[k] = true
	} else {
		delete(set, k)
	}
}

func (t *apiRuleTracker) observe(kind string, typ eventType, obj client.Object, at time.Time) {
	k := key(obj.GetNamespace(), obj.GetName())
	withJWT, ok := t.jwt[k]
	if !ok {
		return
	}
	switch kind {
	case kindAPIRule:
		setMember(t.ready, k, typ != deleted && apiRuleReady(obj.(*gatewayv1alpha1.APIRule)))
	case kindRequestAuthentication:
		setMember(t.objects[kind], k, typ != deleted && withJWT)
	case kindVirtualService, kindAuthorizationPolicy:
		setMember(t.objects[kind], k, typ != deleted)
	default:
		return
	}
	if t.converged() {
		t.done.complete(at)
	}
}

func (t *apiRuleTracker) converged() bool {
	n := len(t.jwt)
	return len(t.ready) == n && len(t.objects[kindVirtualService]) == n &&
		len(t.objects[kindAuthorizationPolicy]) == n && len(t.objects[kindRequestAuthentication]) == t.wantRA
}

func (t *apiRuleTracker) progress() string {
	n := len(t.jwt)
	return fmt.Sprintf("Ready %d/%d, VirtualServices %d/%d, AuthorizationPolicies %d/%d, RequestAuthentications %d/%d",
		len(t.ready), n, len(t.objects[kindVirtualService]), n, len(t.objects[kindAuthorizationPolicy]), n,
		len(t.objects[kindRequestAuthentication]), t.wantRA)
}

func apiRuleReady(r *gatewayv1alpha1.APIRule) bool {
	c := meta.FindStatusCondition(r.Status.Conditions, gatewayv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation &&
		r.Status.ObservedGeneration == r.Generation
}

// rateLimitTracker: every RateLimit has the verdict its target calls for,
// every scope exactly one Enforced limit, every workload its final
// EnvoyFilter.
type rateLimitTracker struct {
	done   *completion
	limits map[string]limitExpectation
	groups int
	// reason is the Ready reason of each RateLimit whose condition is for
	// its generation.
	reason     map[string]string
	acceptable int            // limits whose reason matches their expectation
	enforced   map[string]int // per group
	groupsOK   int            // groups with exactly one Enforced limit
	// envoyFilters: want maps selector value -> patches; present and ok are
	// by EnvoyFilter key.
	wantEF    map[string]int
	presentEF map[string]bool
	okEF      map[string]bool
	// reasons counts the current verdicts, for the report.
	reasons map[string]int
}

func newRateLimitTracker(p *plan) *rateLimitTracker {
	return &rateLimitTracker{
		done: newCompletion(), limits: p.limits, groups: p.groups, reason: map[string]string{},
		enforced: map[string]int{}, wantEF: p.envoyFilters, presentEF: map[string]bool{}, okEF: map[string]bool{},
		reasons: map[string]int{},
	}
}

func (t *rateLimitTracker) completion() *completion { return t.done }

func (e limitExpectation) accepts(reason string) bool {
	if e.kind == targetMissing {
		return reason == gatewayv1alpha1.ReasonTargetNotFound
	}
	return reason == gatewayv1alpha1.ReasonEnforced || reason == gatewayv1alpha1.ReasonConflicted
}

func (t *rateLimitTracker) observe(kind string, typ eventType, obj client.Object, at time.Time) {
	switch kind {
	case kindRateLimit:
		t.observeLimit(typ, obj.(*gatewayv1alpha1.RateLimit))
	case kindEnvoyFilter:
		t.observeEnvoyFilter(typ, obj.(*networkingv1alpha3.EnvoyFilter))
	default:
		return
	}
	if t.converged() {
		t.done.complete(at)
	}
}

func (t *rateLimitTracker) observeLimit(typ eventType, rl *gatewayv1alpha1.RateLimit) {
	k := key(rl.Namespace, rl.Name)
	exp, ok := t.limits[k]
	if !ok {
		return
	}
	now := ""
	if typ != deleted {
		if c := meta.FindStatusCondition(rl.Status.Conditions, gatewayv1alpha1.ConditionReady); c != nil &&
			c.ObservedGeneration == rl.Generation && rl.Status.ObservedGeneration == rl.Generation {
			now = c.Reason
		}
	}
	before := t.reason[k]
	if before == now {
		return
	}
	if before != "" {
		t.reasons[before]--
	}
	if now != "" {
		t.reasons[now]++
	}
	if exp.accepts(before) {
		t.acceptable--
	}
	if exp.accepts(now) {
		t.acceptable++
	}
	if exp.kind == inGroup {
		wasOK := t.enforced[exp.group] == 1
		if before == gatewayv1alpha1.ReasonEnforced {
			t.enforced[exp.group]--
		}
		if now == gatewayv1alpha1.ReasonEnforced {
			t.enforced[exp.group]++
		}
		switch isOK := t.enforced[exp.group] == 1; {
		case isOK && !wasOK:
			t.groupsOK++
		case !isOK && wasOK:
			t.groupsOK--
		}
	}
	if now == "" {
		delete(t.reason, k)
	} else {
		t.reason[k] = now
	}
}

func (t *rateLimitTracker) observeEnvoyFilter(typ eventType, ef *networkingv1alpha3.EnvoyFilter) {
	if ef.Labels[efManagedByLabel] != efManagedBy {
		return
	}
	k := key(ef.Namespace, ef.Name)
	setMember(t.presentEF, k, typ != deleted)
	ok := false
	if typ != deleted && ef.Spec.WorkloadSelector != nil && len(ef.Spec.WorkloadSelector.Labels) == 1 {
		want, known := t.wantEF[ef.Spec.WorkloadSelector.Labels[gatewaySelectorKey]]
		ok = known && len(ef.Spec.ConfigPatches) == want
	}
	setMember(t.okEF, k, ok)
}

func (t *rateLimitTracker) converged() bool {
	return t.acceptable == len(t.limits) && t.groupsOK == t.groups &&
		len(t.presentEF) == len(t.wantEF) && len(t.okEF) == len(t.wantEF)
}

func (t *rateLimitTracker) progress() string {
	return fmt.Sprintf("verdicts as expected %d/%d, scopes with one Enforced limit %d/%d, EnvoyFilters final %d/%d (%d present)",
		t.acceptable, len(t.limits), t.groupsOK, t.groups, len(t.okEF), len(t.wantEF), len(t.presentEF))
}

func (t *rateLimitTracker) verdicts() string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(t.reasons)) {
		if t.reasons[r] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, t.reasons[r]))
		}
	}
	return strings.Join(parts, ", ")
}

// --- phases -----------------------------------------------------------------

// result is one row of the table.
type result struct {
	controller string
	objects    string
	create     time.Duration
	converge   time.Duration
	// reconciles when converged and once the controller was idle
	reconcilesAtConvergence float64
	reconciles              float64
	peakRSS                 float64 // VmHWM, bytes
	peakHeap                float64 // bytes
	notes                   []string
}

func (b *bench) phaseAPIRules(ctx context.Context, p *controllerProcess) (result, error) {
	objs := make([]client.Object, 0, len(b.plan.apiRules))
	for _, r := range b.plan.apiRules {
		objs = append(objs, r)
	}
	return b.runPhase(ctx, p, "(1)", "apirule", fmt.Sprintf("%d APIRules", len(objs)), objs, newAPIRuleTracker(b.plan), nil)
}

func (b *bench) phaseRateLimits(ctx context.Context, p *controllerProcess) (result, error) {
	objs := make([]client.Object, 0, len(b.plan.rateLimits))
	for _, r := range b.plan.rateLimits {
		objs = append(objs, r)
	}
	tr := newRateLimitTracker(b.plan)
	objects := fmt.Sprintf("%d RateLimits / %d gateways", len(objs), len(b.plan.gateways))
	return b.runPhase(ctx, p, "(2)", "ratelimit", objects, objs, tr, func() string {
		return fmt.Sprintf("verdicts at convergence: %s; %d EnvoyFilters", tr.verdicts(), len(tr.presentEF))
	})
}

// runPhase creates objs as fast as the workers allow, waits until the
// tracker sees convergence and returns the measured result. note, when set,
// adds a line computed (under the bench lock) at convergence.
func (b *bench) runPhase(ctx context.Context, p *controllerProcess, label, controller, objects string,
	objs []client.Object, tr tracker, note func() string) (result, error) {
	benchkit.Logf("%s creating %s (%d workers)", label, objects, b.opts.workers)
	b.setTracker(tr)
	cpu0 := b.cpu(p)
	t0 := time.Now()
	created, err := b.createAll(ctx, objs)
	if err != nil {
		return result{}, err
	}
	benchkit.Logf("%s created in %s; waiting for convergence", label, secs(created))
	if err := b.awaitConverged(ctx, tr, p, label); err != nil {
		return result{}, err
	}
	res := result{controller: controller, objects: objects, create: created, converge: tr.completion().at.Sub(t0)}
	res.notes = append(res.notes, "CPU until converged: "+b.cpu(p).since(cpu0))
	benchkit.Logf("%s converged after %s", label, secs(res.converge))
	if note != nil {
		b.mu.Lock()
		res.notes = append(res.notes, note())
		b.mu.Unlock()
	}
	if err := b.finish(ctx, p, &res); err != nil {
		return result{}, err
	}
	return res, nil
}

// awaitConverged waits for the tracker's completion, logging progress.
func (b *bench) awaitConverged(ctx context.Context, tr tracker, p *controllerProcess, phase string) error {
	timer := time.NewTimer(b.opts.timeout)
	defer timer.Stop()
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-tr.completion().ch:
			return nil
		case <-ticker.C:
			reconciles := ""
			if m, err := p.scrape(ctx); err == nil {
				reconciles = fmt.Sprintf(", %g reconciles", sumMetric(m, "controller_runtime_reconcile_total", nil))
			}
			benchkit.Logf("%s %s%s", phase, b.progress(), reconciles)
		case <-timer.C:
			return fmt.Errorf("%s did not converge within %s: %s (controller log: %s)", phase, b.opts.timeout, b.progress(), p.logPath)
		case <-p.exited:
			return fmt.Errorf("%s-controller exited during %s: %v (log: %s)", p.name, phase, p.err, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// finish waits until the controller is idle and fills in its counters and
// memory.
func (b *bench) finish(ctx context.Context, p *controllerProcess, res *result) error {
	m, err := p.scrape(ctx)
	if err != nil {
		return err
	}
	res.reconcilesAtConvergence = sumMetric(m, "controller_runtime_reconcile_total", nil)
	if m, err = p.waitIdle(ctx, b.opts.timeout); err != nil {
		return err
	}
	res.reconciles = sumMetric(m, "controller_runtime_reconcile_total", nil)
	mem, err := p.memory()
	if err != nil {
		return err
	}
	res.peakRSS, res.peakHeap = mem.hwm, p.sampler.peakHeap()

	var byResult []string
	for _, r := range slices.Sorted(maps.Keys(byLabel(m, "controller_runtime_reconcile_total", "result"))) {
		if v := byLabel(m, "controller_runtime_reconcile_total", "result")[r]; v != 0 {
			byResult = append(byResult, fmt.Sprintf("%s %g", r, v))
		}
	}
	mean := "-"
	if count := sumMetric(m, "controller_runtime_reconcile_time_seconds_count", nil); count > 0 {
		mean = ms(time.Duration(sumMetric(m, "controller_runtime_reconcile_time_seconds_sum", nil) / count * float64(time.Second)))
	}
	var requests []string
	byMethod := byLabel(m, "rest_client_requests_total", "method")
	for _, method := range slices.Sorted(maps.Keys(byMethod)) {
		requests = append(requests, fmt.Sprintf("%s %g", method, byMethod[method]))
	}
	res.notes = append(res.notes,
		fmt.Sprintf("reconciles: %g at convergence, %g once idle (%s), mean %s each", res.reconcilesAtConvergence, res.reconciles, strings.Join(byResult, ", "), mean),
		fmt.Sprintf("API requests: %s", strings.Join(requests, ", ")),
		fmt.Sprintf("RSS now %s; log %s", mib(mem.rss), p.logPath))
	benchkit.Logf("%s-controller idle: %g reconciles, peak RSS %s, peak heap %s", p.name, res.reconciles, mib(res.peakRSS), mib(res.peakHeap))
	return nil
}

// --- CPU --------------------------------------------------------------------

// cpuSnapshot is the machine's CPU time and that of the processes involved
// (the measured controller, the bench, and the control plane when the bench
// brought the cluster up), in seconds.
type cpuSnapshot struct {
	at          time.Time
	total, idle float64
	procs       []string
	seconds     map[string]float64
}

// clockTicks is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

func (b *bench) cpu(p *controllerProcess) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), seconds: map[string]float64{}}
	if raw, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(raw), "\n")
		fields := strings.Fields(line)
		for i, f := range fields[1:min(len(fields), 9)] {
			v, _ := strconv.ParseFloat(f, 64)
			s.total += v / clockTicks
			if i == 3 || i == 4 { // idle, iowait
				s.idle += v / clockTicks
			}
		}
	}
	type process struct {
		name string
		pid  int
	}
	pids := []process{{p.name + "-controller", p.cmd.Process.Pid}, {"bench", os.Getpid()}}
	if b.opts.kubeconfig == "" {
		// hack/cluster.sh keeps kwokctl's state there.
		cacheDir := os.Getenv("XDG_CACHE_HOME")
		if cacheDir == "" {
			home, _ := os.UserHomeDir()
			cacheDir = filepath.Join(home, ".cache")
		}
		for _, component := range []string{"kube-apiserver", "etcd"} {
			raw, err := os.ReadFile(filepath.Join(cacheDir, "portico", "kwok", "clusters", b.opts.cluster, "pids", component+".pid"))
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && perr == nil {
				pids = append(pids, process{component, pid})
			}
		}
	}
	for _, proc := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", proc.pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses:
		// utime and stime are the 12th and 13th of them.
		_, after, ok := strings.Cut(string(raw), ") ")
		fields := strings.Fields(after)
		if !ok || len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		s.procs = append(s.procs, proc.name)
		s.seconds[proc.name] = (utime + stime) / clockTicks
	}
	return s
}

// since describes the CPU used between two snapshots.
func (s cpuSnapshot) since(before cpuSnapshot) string {
	var parts []string
	for _, name := range s.procs {
		if v, ok := before.seconds[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1fs", name, s.seconds[name]-v))
		}
	}
	busy := "-"
	if total := s.total - before.total; total > 0 {
		busy = fmt.Sprintf("%.0f%%", 100*(1-(s.idle-before.idle)/total))
	}
	return fmt.Sprintf("%s over %s; all %d CPUs %s busy", strings.Join(parts, ", "), secs(s.at.Sub(before.at)), goruntime.NumCPU(), busy)
}

// --- controller processes ---------------------------------------------------

type controllerProcess struct {
	name       string
	cmd        *exec.Cmd
	cancel     context.CancelFunc
	exited     chan struct{}
	err        error // set before exited is closed
	logPath    string
	metricsURL string
	readyURL   string
	sampler    *heapSampler
}

// startController runs bin/<name>-controller against the cluster, with
// metrics and probes on free loopback ports and its output in a log file,
// and waits for its /readyz. A returned process must be stopped, also with
// an error.
func (b *bench) startController(ctx context.Context, name string) (*controllerProcess, error) {
	metricsAddr, err := benchkit.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	probeAddr, err := benchkit.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp("", "portico-bench-"+name+"-*.log")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(b.opts.binDir, name+"-controller")
	procCtx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(procCtx, bin,
		"--kubeconfig", b.kubeconfig,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--leader-elect=false",
		"--log-level", b.opts.logLevel,
	)
	// Stop with SIGTERM (the controllers shut down cleanly); SIGKILL only
	// if it has not exited 15 s later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		cancel()
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &controllerProcess{
		name: name, cmd: cmd, cancel: cancel, exited: make(chan struct{}), logPath: logFile.Name(),
		metricsURL: "http://" + metricsAddr + "/metrics",
		readyURL:   "http://" + probeAddr + "/readyz",
	}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	benchkit.Logf("%s-controller started (pid %d), log: %s", name, cmd.Process.Pid, p.logPath)
	p.sampler = startHeapSampler(p, b.opts.sample)
	if err := p.waitReady(ctx, 2*time.Minute); err != nil {
		return p, err
	}
	return p, nil
}

// stop sends SIGTERM and waits for the controller to exit.
func (p *controllerProcess) stop() error {
	p.sampler.stop()
	select {
	case <-p.exited:
		// It exited on its own (or with the terminal's Ctrl-C).
	default:
		benchkit.Logf("stopping %s-controller (SIGTERM)", p.name)
		p.cancel()
		<-p.exited
	}
	p.cancel()
	// After a SIGTERM a clean exit reads as context.Canceled (exec.Cmd's
	// convention); a failing one as an *exec.ExitError.
	if p.err != nil && !errors.Is(p.err, context.Canceled) {
		return fmt.Errorf("%s-controller: %w (log: %s)", p.name, p.err, p.logPath)
	}
	return nil
}

// waitReady waits for the controller's /readyz (CRDs found, workers'
// caches synced).
func (p *controllerProcess) waitReady(ctx context.Context, timeout time.Duration) error {
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
			return fmt.Errorf("%s-controller not ready after %s (log: %s)", p.name, timeout, p.logPath)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s-controller exited before it was ready: %v (log: %s)", p.name, p.err, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitIdle waits until the reconcile counter has not moved for quietFor
// and returns the metrics then. It samples /metrics, which is fine: it only
// decides when the totals are read.
func (p *controllerProcess) waitIdle(ctx context.Context, timeout time.Duration) ([]metricSample, error) {
	deadline := time.Now().Add(timeout)
	last, err := p.scrape(ctx)
	if err != nil {
		return nil, err
	}
	quietSince := time.Now()
	for time.Since(quietSince) < quietFor {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s-controller kept reconciling for %s after convergence (log: %s)", p.name, timeout, p.logPath)
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-p.exited:
			return nil, fmt.Errorf("%s-controller exited: %v (log: %s)", p.name, p.err, p.logPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		now, err := p.scrape(ctx)
		if err != nil {
			return nil, err
		}
		if sumMetric(now, "controller_runtime_reconcile_total", nil) != sumMetric(last, "controller_runtime_reconcile_total", nil) {
			quietSince = time.Now()
		}
		last = now
	}
	return last, nil
}

type memoryStatus struct{ hwm, rss float64 }

// memory reads VmHWM (peak resident set) and VmRSS of the process.
func (p *controllerProcess) memory() (memoryStatus, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return memoryStatus{}, fmt.Errorf("%s-controller memory: %w", p.name, err)
	}
	var m memoryStatus
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmHWM":
			m.hwm = kb * 1024
		case "VmRSS":
			m.rss = kb * 1024
		}
	}
	if m.hwm == 0 {
		return m, fmt.Errorf("%s-controller: no VmHWM in /proc/%d/status", p.name, p.cmd.Process.Pid)
	}
	return m, nil
}

// heapSampler keeps the largest go_memstats_heap_inuse_bytes seen.
type heapSampler struct {
	mu   sync.Mutex
	peak float64
	quit chan struct{}
	done chan struct{}
}

func startHeapSampler(p *controllerProcess, every time.Duration) *heapSampler {
	s := &heapSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-p.exited:
				return
			case <-ticker.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), every*4)
			m, err := p.scrape(ctx)
			cancel()
			if err != nil {
				continue // not listening yet, or busy: the next sample counts
			}
			if v := sumMetric(m, "go_memstats_heap_inuse_bytes", nil); v > 0 {
				s.mu.Lock()
				s.peak = max(s.peak, v)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *heapSampler) peakHeap() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

func (s *heapSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// --- metrics ----------------------------------------------------------------

// metricSample is one line of the Prometheus text format.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

func (p *controllerProcess) scrape(ctx context.Context) ([]metricSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s-controller metrics: %w", p.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s-controller metrics: %s", p.name, resp.Status)
	}
	var out []metricSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if s, ok := parseSample(sc.Text()); ok {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s-controller metrics: %w", p.name, err)
	}
	return out, nil
}

// parseSample parses e.g.
// controller_runtime_reconcile_total{controller="apirule",result="success"} 4
func parseSample(line string) (metricSample, bool) {
	if line == "" || line[0] == '#' {
		return metricSample{}, false
	}
	s := metricSample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i > 0 && line[i] == '{' {
		s.name = line[:i]
		rest = line[i+1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			name, after, ok := strings.Cut(rest, `="`)
			if !ok {
				return metricSample{}, false
			}
			var value strings.Builder
			i := 0
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				value.WriteByte(after[i])
			}
			if i >= len(after) {
				return metricSample{}, false
			}
			s.labels[name] = value.String()
			rest = after[i+1:]
		}
	} else if i > 0 {
		s.name, rest = line[:i], line[i:]
	} else {
		return metricSample{}, false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return metricSample{}, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return metricSample{}, false
	}
	s.value = v
	return s, true
}

func matches(s metricSample, name string, filter map[string]string) bool {
	if s.name != name {
		return false
	}
	for k, v := range filter {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

func sumMetric(samples []metricSample, name string, filter map[string]string) float64 {
	var sum float64
	for _, s := range samples {
		if matches(s, name, filter) {
			sum += s.value
		}
	}
	return sum
}

func byLabel(samples []metricSample, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if matches(s, name, nil) {
			out[s.labels[label]] += s.value
		}
	}
	return out
}

// --- report -----------------------------------------------------------------

// describe names what was measured, for the table's header.
func (b *bench) describe(ctx context.Context) (string, error) {
	version, err := exec.CommandContext(ctx, filepath.Join(b.opts.binDir, "apirule-controller"), "version").Output()
	if err != nil {
		return "", fmt.Errorf("apirule-controller version: %w", err)
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
	return fmt.Sprintf("portico controllers %s on %s (kube-apiserver %s, kwok), %d CPUs, %d create workers, %s",
		strings.TrimSpace(string(version)), where, server.GitVersion, goruntime.NumCPU(), b.opts.workers,
		time.Now().UTC().Format(time.RFC3339)), nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func mib(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

func printTable(w io.Writer, header string, results ...result) {
	rows := [][]string{{"controller", "objects", "create time", "converge time", "reconciles", "peak RSS", "peak heap"}}
	for _, r := range results {
		rows = append(rows, []string{r.controller, r.objects, secs(r.create), secs(r.converge),
			strconv.FormatFloat(r.reconciles, 'f', -1, 64), mib(r.peakRSS), mib(r.peakHeap)})
	}
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
			if j < 2 {
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
	buf.WriteString("\ncreate: first create call until the last returned; converge: first create call until converged.\n" +
		"peak RSS: VmHWM of the process; peak heap: largest sampled go_memstats_heap_inuse_bytes.\n")
	for _, r := range results {
		for _, n := range r.notes {
			fmt.Fprintf(&buf, "%s: %s\n", r.controller, n)
		}
	}
	_, _ = w.Write(buf.Bytes())
}
