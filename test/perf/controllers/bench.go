package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// bench holds the cluster, the informers and the plan.
type bench struct {
	opts options
	conn *framework.Connection
	// c writes to and reads from the API server directly.
	c    client.Client
	plan *plan
	// kubeconfigs are the controllers' (impersonating their
	// ServiceAccounts), by binary.
	kubeconfigs map[string]string

	mu   sync.Mutex
	tr   tracker // the running phase's, fed by every informer event
	done *completion
	// extra, when set, also sees every informer event.
	extra func(framework.Event)
	// gateway plays the controller of the Gateway API Gateways; it sees
	// the HTTPRoute events outside the bench's lock.
	gateway *standIn
}

// kinds are the types the bench reads and writes beyond those
// testenv.Scheme always has.
var kinds = []func(*runtime.Scheme) error{
	discoveryv1.AddToScheme, gatewayv1alpha1.AddToScheme,
	networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, securityv1.AddToScheme, gatewayapiv1.Install,
}

// run does the whole bench and reports to w; errors mean the run broke
// (or, for the short mode, that a controller did not converge correctly).
func run(ctx context.Context, o options, w io.Writer) (results, error) {
	b := &bench{opts: o, plan: newPlan(o.sizes)}
	res, err := framework.Measure(ctx, o.BenchOptions, w, framework.Spec[results]{
		Types:      kinds,
		GatewayAPI: true,
		Binaries:   []string{o.binary(contract.APIRule), o.binary(contract.RateLimit)},
		Watches:    watches(),
		Handle:     b.handle,
		Run: func(ctx context.Context, conn *framework.Connection) (results, error) {
			b.conn, b.c = conn, conn.Client
			// Its own client, as a real implementation has.
			c, err := client.New(conn.Config, client.Options{Scheme: conn.Scheme})
			if err != nil {
				return nil, err
			}
			b.setGateway(newStandIn(c, b.plan.routeGateways))
			b.gateway.start(ctx)
			defer b.gateway.stop()
			return b.run(ctx)
		},
	})
	if err != nil {
		return res, err
	}
	// After the report: a run over its floor's targets is reported in full.
	return res, res.checkFloors()
}

// run cleans up what an earlier run left, creates the fixtures, measures
// both controllers and cleans up.
func (b *bench) run(ctx context.Context) (res results, retErr error) {
	if err := b.cleanup(ctx); err != nil {
		return nil, err
	}
	if clusterGoes := b.opts.Down && b.conn.Cluster != nil; !b.opts.keep && !clusterGoes {
		// Registered before the controllers start, so it runs after they
		// stopped. A fresh context: the run's may be cancelled.
		defer func() {
			cleanupCtx, cancel := context.WithTimeout(context.Background(), b.opts.Timeout)
			defer cancel()
			retErr = errors.Join(retErr, b.cleanup(cleanupCtx))
		}()
	}
	if err := b.createNamespaces(ctx); err != nil {
		return nil, err
	}
	if err := b.createFixtures(ctx); err != nil {
		return nil, err
	}
	return b.measure(ctx)
}

// cleanup removes every object of an earlier run: the bench's namespaces
// (with everything in them) and its objects in istio-system, including the
// EnvoyFilters ratelimit-controller wrote there.
func (b *bench) cleanup(ctx context.Context) error {
	sel := client.MatchingLabels(benchLabels())
	inGatewayNS := client.InNamespace(gatewayNS)
	var errs []error
	for _, obj := range []client.Object{&gatewayv1alpha1.RateLimit{}, &networkingv1.Gateway{}, &gatewayapiv1.Gateway{}, &corev1.Pod{}} {
		errs = append(errs, ignoreGone(b.c.DeleteAllOf(ctx, obj, inGatewayNS, sel)))
	}
	errs = append(errs, ignoreGone(b.c.DeleteAllOf(ctx, &gatewayapiv1.GatewayClass{}, sel)))
	errs = append(errs, ignoreGone(b.c.DeleteAllOf(ctx, &networkingv1alpha3.EnvoyFilter{}, inGatewayNS,
		client.MatchingLabels{labelManagedBy: contract.RateLimit.Binary()})))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete the bench's objects in %s: %w", gatewayNS, err)
	}
	var nss corev1.NamespaceList
	if err := b.c.List(ctx, &nss, sel); err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	// No apirule controller runs now to finalize the APIRules: take its
	// finalizer off, as an administrator would after removing it.
	if err := b.releaseAPIRules(ctx, nss.Items); err != nil {
		return err
	}
	if len(nss.Items) > 0 {
		framework.Logf("deleting the bench's %d namespaces", len(nss.Items))
	}
	for i := range nss.Items {
		if err := b.c.Delete(ctx, &nss.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete namespace %s: %w", nss.Items[i].Name, err)
		}
	}
	return b.waitGone(ctx, "the bench's namespaces and pods", &corev1.NamespaceList{}, &corev1.PodList{})
}

// waitGone waits until no object of the lists' kinds carries the bench's
// label.
func (b *bench) waitGone(ctx context.Context, what string, lists ...client.ObjectList) error {
	return b.waitNone(ctx, what, client.MatchingLabels(benchLabels()), lists...)
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

func (b *bench) createNamespaces(ctx context.Context) error {
	// The APIGateway that wants the controllers, as on a cluster with
	// Portico: without one, a controller that stops retires (the apirule
	// controller takes its finalizer off every APIRule, the ratelimit
	// controller deletes its EnvoyFilters).
	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
	if err := b.c.Create(ctx, gw); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the APIGateway: %w", err)
	}
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

// createFixtures creates what the APIRules and RateLimits refer to: the
// Istio Gateways and their pods, the GatewayClass and the Gateway API
// Gateways, and the Services of both modes.
func (b *bench) createFixtures(ctx context.Context) error {
	framework.Logf("creating %d Istio Gateways, %d gateway pods, %d Gateway API Gateways and %d Services",
		len(b.plan.gateways), len(b.plan.pods), len(b.plan.routeGateways), len(b.plan.services))
	objs := []client.Object{b.plan.gatewayClass}
	for _, gw := range b.plan.routeGateways {
		objs = append(objs, gw)
	}
	for _, gw := range b.plan.gateways {
		objs = append(objs, gw)
	}
	for _, pod := range b.plan.pods {
		objs = append(objs, pod)
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
// Endpoints and EndpointSlice of every Service (hack/cluster.sh raises its
// client's 20 QPS to 500, or 20,000 Services would take ~17 minutes), and
// it must not compete with the controllers for the API server during a
// measurement: on a real cluster the Services have long been there.
func (b *bench) waitEndpoints(ctx context.Context) error {
	want := len(b.plan.services)
	framework.Logf("waiting for kube-controller-manager to write the Endpoints and EndpointSlices of %d Services", want)
	last := time.Now()
	// Once a second: each poll lists every Endpoints and EndpointSlice.
	err := wait.PollUntilContextTimeout(ctx, time.Second, b.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		endpoints, err := b.count(ctx, corev1.SchemeGroupVersion.WithKind("EndpointsList"))
		if err != nil {
			return false, err
		}
		slices, err := b.count(ctx, discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"), client.HasLabels{discoveryv1.LabelServiceName})
		if err != nil {
			return false, err
		}
		if time.Since(last) > 10*time.Second {
			framework.Logf("  Endpoints %d/%d, EndpointSlices %d/%d", endpoints, want, slices, want)
			last = time.Now()
		}
		return endpoints >= want && slices >= want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Services' Endpoints and EndpointSlices: %w", err)
	}
	return nil
}

// count counts the objects of a list kind in the bench's namespaces: one
// cluster-wide list of their metadata (one list per namespace would be 500
// lists a poll at --namespaces 500).
func (b *bench) count(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk)
	if err := b.c.List(ctx, list, opts...); err != nil {
		return 0, err
	}
	ours := make(map[string]bool, len(b.plan.namespaces))
	for _, ns := range b.plan.namespaces {
		ours[ns] = true
	}
	n := 0
	for i := range list.Items {
		if ours[list.Items[i].Namespace] {
			n++
		}
	}
	return n, nil
}

// releaseAPIRules removes the finalizers of the APIRules in namespaces.
func (b *bench) releaseAPIRules(ctx context.Context, namespaces []corev1.Namespace) error {
	for _, ns := range namespaces {
		if err := b.releaseNamespace(ctx, ns.Name); err != nil {
			return err
		}
	}
	return nil
}

// releaseNamespace removes the finalizers of the APIRules in a namespace.
func (b *bench) releaseNamespace(ctx context.Context, namespace string) error {
	var rules gatewayv1alpha1.APIRuleList
	if err := b.c.List(ctx, &rules, client.InNamespace(namespace)); err != nil {
		return ignoreGone(err)
	}
	for i := range rules.Items {
		r := &rules.Items[i]
		if len(r.Finalizers) == 0 {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := b.c.Patch(ctx, r, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove the finalizers of APIRule %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	return nil
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

func metadataOnly(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// watches are what the trackers look at. Istio objects whose existence is
// all that matters are watched as metadata only.
func watches() []framework.Watch {
	return []framework.Watch{
		{Kind: kindAPIRule, Object: &gatewayv1alpha1.APIRule{}},
		{Kind: kindVirtualService, Object: metadataOnly(networkingv1.SchemeGroupVersion.WithKind(kindVirtualService))},
		// Whole: the stand-in gateway answers them, the tracker reads
		// their status.
		{Kind: kindHTTPRoute, Object: &gatewayapiv1.HTTPRoute{}},
		{Kind: kindAuthorizationPolicy, Object: metadataOnly(securityv1.SchemeGroupVersion.WithKind(kindAuthorizationPolicy))},
		{Kind: kindRequestAuthentication, Object: metadataOnly(securityv1.SchemeGroupVersion.WithKind(kindRequestAuthentication))},
		{Kind: kindRateLimit, Object: &gatewayv1alpha1.RateLimit{}},
		{Kind: kindEnvoyFilter, Object: &networkingv1alpha3.EnvoyFilter{}},
	}
}

// setTracker makes tr the tracker of the phase that starts.
func (b *bench) setTracker(tr tracker) *completion {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tr, b.done = tr, newCompletion()
	return b.done
}

// setGateway installs the stand-in gateway controller.
func (b *bench) setGateway(s *standIn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gateway = s
}

func (b *bench) handle(e framework.Event) {
	if e.Kind == kindHTTPRoute {
		b.mu.Lock()
		gateway := b.gateway
		b.mu.Unlock()
		if gateway != nil {
			gateway.observe(e)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.extra != nil {
		b.extra(e)
	}
	if b.tr == nil {
		return
	}
	b.tr.observe(e)
	if b.tr.converged() {
		b.done.complete(e.At)
	}
}

// withTracker runs f on the phase's tracker under the bench's lock.
func (b *bench) withTracker(f func(tracker)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b.tr)
}

// binary is the path of a controller's binary; a relative --bin is
// relative to the repository.
func (o options) binary(c contract.Controller) string {
	return filepath.Join(framework.RepoPath(o.binDir), c.Binary())
}
