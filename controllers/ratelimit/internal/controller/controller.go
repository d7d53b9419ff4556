package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/fairqueue"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/internal/owned"
)

// FieldManager is the ratelimit controller's server-side apply identity.
const FieldManager = "ratelimit-controller"

// +kubebuilder:rbac:groups=gateway.portico.dev,resources=ratelimits,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=ratelimits/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.istio.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.istio.io,resources=envoyfilters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways,verbs=get

// World is the single key every event maps to.
var World = reconcile.Request{NamespacedName: types.NamespacedName{Name: "world"}}

// ManagedSelector selects the EnvoyFilters that claim to be this
// controller's; Written decides which of them are.
var ManagedSelector = client.MatchingLabels{topology.LabelManagedBy: topology.ManagedBy}

// Written reports whether the controller wrote ef, which carries its
// labels. Labels are a claim, never a proof: whoever writes a namespace can
// copy them. The controller writes a filter only in Istio's root namespace
// (root), which no tenant writes, or in the namespace of the RateLimits it
// holds, which its label names; a labelled filter anywhere else (a tenant's
// look-alike naming another namespace) is never the controller's, so it is
// never updated, deleted or retired. A look-alike a tenant writes in its
// own namespace can only make the controller change or remove that
// tenant's own object, at a name the controller writes there anyway.
func Written(ef client.Object, root string) bool {
	l := ef.GetLabels()
	if l[topology.LabelManagedBy] != topology.ManagedBy {
		return false
	}
	return ef.GetNamespace() == root || l[topology.LabelNamespace] == ef.GetNamespace()
}

// foreignRecheck is how often an EnvoyFilter name held by an object the
// controller does not manage is checked again: such objects are not cached
// (the cache holds only managed EnvoyFilters), so no event reports their
// removal.
const foreignRecheck = time.Minute

// Reconciler computes and applies every EnvoyFilter at once.
type Reconciler struct {
	Client client.Client
	// Reader reads past the cache; it tells a missing EnvoyFilter from one
	// the controller does not manage. SetupWithManager defaults it to the
	// manager's API reader.
	Reader client.Reader
	// GatewaysKnown, GatewayAPIGatewaysKnown and APIRulesKnown are true while
	// those CRDs are installed (and so watched).
	GatewaysKnown           bool
	GatewayAPIGatewaysKnown bool
	APIRulesKnown           bool
	// RootNamespace is Istio's root namespace (topology.DefaultRootNamespace
	// when empty).
	RootNamespace string
	// Global is the administrator's global rate limiting.
	Global Global

	// latency times each RateLimit generation from its first sighting to
	// Ready (portico_spec_to_ready_seconds); nil until SetupWithManager.
	latency *metrics.SpecToReady
	// objects writes and removes the controller's objects (see writer).
	objects    *owned.Writer
	writerOnce sync.Once
	// work is the latest world's work of each tenant.
	work tenantWork
}

// errForeign marks an EnvoyFilter name already used by an object the
// controller does not manage.
var errForeign = errors.New("conflict")

// Reconcile serves two kinds of keys. World computes what every tenant's
// EnvoyFilters, feed ConfigMaps and statuses should be from the whole
// topology (state of the world) and hands each tenant its part; a tenant's
// key (tenantRequest) writes that part. The computation is the only work
// that sees every tenant, and it writes nothing: a tenant whose large
// filter takes a second to write holds up one worker, never the world, so
// another tenant's change is computed and written meanwhile.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req == World {
		start := time.Now()
		defer func() { worldSeconds.Observe(time.Since(start).Seconds()) }()
		return reconcile.Result{}, r.computeWorld(ctx)
	}
	return r.writeTenantWork(ctx, req.Namespace)
}

// computeWorld computes the world and publishes each tenant's work: the
// namespaces with RateLimits, global limits or filters to write, and the
// namespaces whose live filters or feed ConfigMaps no policy needs any
// more (their work removes them).
func (r *Reconciler) computeWorld(ctx context.Context) error {
	in, limits, err := r.read(ctx)
	if err != nil {
		return err
	}
	if in.Global, err = r.globalInput(ctx); err != nil {
		return err
	}
	out := topology.Compute(in)
	tenants := tenantsOf(out.EnvoyFilters, limits, out.GlobalConfigs)
	stale, err := r.liveTenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		delete(stale, t.namespace)
	}
	for _, ns := range slices.Sorted(maps.Keys(stale)) {
		tenants = append(tenants, &tenant{namespace: ns})
	}
	for _, t := range tenants {
		t.verdicts = out.Verdicts
	}
	r.work.publish(tenants)
	return nil
}

// writeTenantWork writes the work of one tenant that the latest world
// computed (writeTenant), then removes the tenant's live filters and feed
// ConfigMap that work no longer has. Before the first world, there is no
// work, and nothing is written or removed.
func (r *Reconciler) writeTenantWork(ctx context.Context, ns string) (result reconcile.Result, err error) {
	t := r.work.of(ns)
	if t == nil {
		return result, nil
	}
	live, liveConfigs, err := r.liveOf(ctx, ns)
	if err != nil {
		return result, err
	}
	errs, foreign := r.writeTenant(ctx, t, live, liveConfigs, t.verdicts)
	if foreign {
		result.RequeueAfter = foreignRecheck
	}
	wanted := map[string]bool{}
	for _, ef := range t.filters {
		wanted[ef.Namespace+"/"+ef.Name] = true
	}
	errs = append(errs, r.deleteFilters(ctx, live, wanted))
	if r.Global.Enabled {
		wantedConfigs := map[string]bool{}
		if t.config != nil {
			wantedConfigs[globallimit.ConfigMapName(t.config.Namespace)] = true
		}
		errs = append(errs, r.deleteGlobalConfigs(ctx, liveConfigs, wantedConfigs))
	}
	return result, errors.Join(errs...)
}

// writeTenant writes one tenant's work: its limits in the rate-limit
// service's feed, then its filters, then its RateLimits' statuses, which
// report whether those were written. It returns the errors to retry, and
// whether an object the controller does not manage holds a filter's name
// (not retried with backoff: it lasts until someone removes or renames it).
func (r *Reconciler) writeTenant(ctx context.Context, t *tenant, live map[string]*networkingv1alpha3.EnvoyFilter,
	liveConfigs map[string]*corev1.ConfigMap, verdicts map[types.NamespacedName]topology.Verdict) (errs []error, foreign bool) {
	failed := map[string]error{}
	if t.config != nil {
		// Before the filters: the service knows a limit before the gateways
		// count requests against it.
		if err := r.writeGlobalConfig(ctx, *t.config, liveConfigs); err != nil {
			for _, ef := range t.filters {
				failed[ef.Namespace+"/"+ef.Name] = err
			}
			if !errors.Is(err, errOverBudget) { // that lasts until the RateLimits change
				errs = append(errs, err)
			}
		}
	}
	for _, ef := range t.filters {
		key := ef.Namespace + "/" + ef.Name
		if failed[key] != nil {
			continue
		}
		if err := topology.CheckSize(ef); err != nil {
			// Not retried with backoff: it lasts until the RateLimits or
			// their targets change, which reconciles again. The live
			// version, if any, is kept.
			ctrl.LoggerFrom(ctx).Info("EnvoyFilter over its size budget; not written", "envoyfilter", key, "error", err.Error())
			failed[key] = err
			continue
		}
		err := r.apply(ctx, ef, live[key])
		switch {
		case err == nil:
			continue
		case errors.Is(err, errForeign):
			foreign = true
			ctrl.LoggerFrom(ctx).Info("EnvoyFilter name taken by an object the controller does not manage; left untouched", "envoyfilter", key)
		default:
			errs = append(errs, err)
		}
		failed[key] = err
	}
	return append(errs, r.writeStatuses(ctx, t.limits, verdicts, failed)), foreign
}

// The controller's workers: the world is computed by one at a time (a key
// is never worked on twice at once), so while it runs the other 4 write
// tenants' work, and each tenant's work goes to one worker at a time;
// statusWriters is the status writes in flight per tenant.
const (
	workers       = 5
	statusWriters = 4
)

// inParallel calls fn for every item from n goroutines, starting the items
// in order.
func inParallel[T any](ctx context.Context, items []T, n int, fn func(T)) {
	workqueue.ParallelizeUntil(ctx, n, len(items), func(i int) { fn(items[i]) })
}

// writeStatuses writes the statuses of a tenant's RateLimits that
// changed, several at a time.
func (r *Reconciler) writeStatuses(ctx context.Context, limits []*gatewayv1alpha1.RateLimit, verdicts map[types.NamespacedName]topology.Verdict, failed map[string]error) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	inParallel(ctx, limits, statusWriters, func(limit *gatewayv1alpha1.RateLimit) {
		if err := r.writeStatus(ctx, limit, verdicts, failed); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// defaultGateway is the gateway APIRules that name none use, "" for none
// (APIGateway.DefaultGateway). It is read past the cache: the controller may
// only get the APIGateway; a new default gateway reaches it as the Gateway
// it watches appearing.
// gatewayAPI is true when it is a Gateway API Gateway
// (APIGateway.DefaultGatewayAPI): APIRules naming no gateway are then in
// HTTPRoute mode on it.
func (r *Reconciler) defaultGateway(ctx context.Context) (ref string, gatewayAPI bool, err error) {
	gw := &operatorv1alpha1.APIGateway{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("read the APIGateway's default gateway: %w", err)
	}
	ref, _, _ = gw.DefaultGateway()
	return ref, gw.DefaultGatewayAPI(), nil
}

func (r *Reconciler) read(ctx context.Context) (topology.Input, []gatewayv1alpha1.RateLimit, error) {
	in := topology.Input{GatewaysKnown: r.GatewaysKnown, GatewayAPIGatewaysKnown: r.GatewayAPIGatewaysKnown, APIRulesKnown: r.APIRulesKnown,
		RootNamespace: r.rootNamespace()}
	// The world is only read here (statuses are patched from copies), so the
	// lists share the cache's objects instead of deep-copying thousands.
	var limits gatewayv1alpha1.RateLimitList
	var err error
	if err = r.Client.List(ctx, &limits, client.UnsafeDisableDeepCopy); err != nil {
		return in, nil, fmt.Errorf("list RateLimits: %w", err)
	}
	for _, l := range limits.Items {
		if !l.DeletionTimestamp.IsZero() {
			continue
		}
		in.Policies = append(in.Policies, topology.Policy{Namespace: l.Namespace, Name: l.Name, UID: l.UID, Created: l.CreationTimestamp.Time, Spec: l.Spec})
	}
	if in.Gateways, err = r.istioGateways(ctx); err != nil {
		return in, nil, err
	}
	if in.GatewayAPIGateways, err = r.gatewayAPIGateways(ctx); err != nil {
		return in, nil, err
	}
	selectors := make([]map[string]string, 0, len(in.Gateways)+len(in.GatewayAPIGateways))
	for _, g := range in.Gateways {
		selectors = append(selectors, g.Selector)
	}
	for _, g := range in.GatewayAPIGateways {
		selectors = append(selectors, g.Selector())
	}
	if in.Pods, err = r.gatewayPods(ctx, selectors); err != nil {
		return in, nil, err
	}
	if in.APIRules, err = r.apiRules(ctx, in.Policies); err != nil {
		return in, nil, err
	}
	return in, limits.Items, nil
}

// istioGateways lists Istio's Gateways, none while their CRD is absent.
func (r *Reconciler) istioGateways(ctx context.Context) ([]topology.Gateway, error) {
	if !r.GatewaysKnown {
		return nil, nil
	}
	var gateways networkingv1.GatewayList
	if err := r.Client.List(ctx, &gateways, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Istio Gateways: %w", err)
	}
	out := make([]topology.Gateway, 0, len(gateways.Items))
	for _, g := range gateways.Items {
		out = append(out, topology.Gateway{Namespace: g.Namespace, Name: g.Name, Selector: g.Spec.Selector})
	}
	return out, nil
}

// gatewayAPIGateways lists the Gateway API's Gateways with the ports of
// their HTTP and HTTPS listeners, none while their CRD is absent. Names
// longer than a label value are left out: no pod can carry them, and the
// RateLimits naming them are Invalid.
func (r *Reconciler) gatewayAPIGateways(ctx context.Context) ([]topology.GatewayAPIGateway, error) {
	if !r.GatewayAPIGatewaysKnown {
		return nil, nil
	}
	var gateways gatewayapiv1.GatewayList
	if err := r.Client.List(ctx, &gateways, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Gateway API Gateways: %w", err)
	}
	out := make([]topology.GatewayAPIGateway, 0, len(gateways.Items))
	for _, g := range gateways.Items {
		if len(validation.IsValidLabelValue(g.Name)) > 0 {
			continue
		}
		out = append(out, topology.GatewayAPIGateway{Namespace: g.Namespace, Name: g.Name, Ports: httpPorts(g.Spec.Listeners)})
	}
	return out, nil
}

// httpPorts are the distinct ports of the HTTP and HTTPS listeners, in
// order.
func httpPorts(listeners []gatewayapiv1.Listener) []int32 {
	var ports []int32
	for _, l := range listeners {
		if l.Protocol == gatewayapiv1.HTTPProtocolType || l.Protocol == gatewayapiv1.HTTPSProtocolType {
			ports = append(ports, l.Port)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// apiRules gets the APIRules the policies target, with their gateway: the
// Istio Gateway they name or the APIGateway's default one, or in HTTPRoute
// mode their parent Gateway API Gateway. Only targets are read (the
// topology needs no other), so a reconcile costs the same with 10 APIRules
// in the cluster or 10,000.
func (r *Reconciler) apiRules(ctx context.Context, policies []topology.Policy) ([]topology.APIRule, error) {
	if !r.APIRulesKnown {
		return nil, nil
	}
	var (
		out  []topology.APIRule
		seen = map[types.NamespacedName]bool{}
		// APIRules that name no gateway use the APIGateway's default one,
		// read (past the cache) once such an APIRule is a target.
		defaultRead                       bool
		defaultGateway, defaultGatewayAPI = "", false
	)
	for _, p := range policies {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.TargetRef.Name}
		if !topology.TargetsAPIRule(p.Spec.TargetRef) || seen[key] {
			continue
		}
		seen[key] = true
		a := &gatewayv1alpha1.APIRule{}
		if err := r.Client.Get(ctx, key, a, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("get APIRule %s: %w", key, err)
		}
		if a.Spec.Gateway == "" && a.Spec.ParentRef == nil && !defaultRead {
			var err error
			if defaultGateway, defaultGatewayAPI, err = r.defaultGateway(ctx); err != nil {
				return nil, err
			}
			defaultRead = true
		}
		out = append(out, targetOf(a, defaultGateway, defaultGatewayAPI))
	}
	return out, nil
}

// targetOf is an APIRule as the topology sees it: its parent Gateway API
// Gateway in HTTPRoute mode (spec.parentRef, or the default gateway when
// that is a Gateway API one and the APIRule names none), else its Istio
// Gateway, the default one when it names none.
func targetOf(a *gatewayv1alpha1.APIRule, defaultGateway string, defaultGatewayAPI bool) topology.APIRule {
	rule := topology.APIRule{Namespace: a.Namespace, Name: a.Name, Gateway: a.Spec.Gateway, Rules: a.Spec.Rules}
	var parent *types.NamespacedName
	switch p := a.Spec.ParentRef; {
	case p != nil:
		parent = &types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if parent.Namespace == "" {
			parent.Namespace = a.Namespace
		}
	case rule.Gateway == "" && defaultGatewayAPI && defaultGateway != "":
		ns, name, _ := strings.Cut(defaultGateway, "/")
		parent = &types.NamespacedName{Namespace: ns, Name: name}
	case rule.Gateway == "":
		rule.Gateway = defaultGateway
	}
	if parent != nil {
		rule.ParentRef = parent
		for _, h := range a.Spec.Hosts {
			rule.Hosts = append(rule.Hosts, string(h))
		}
	}
	return rule
}

// gatewayPods returns where the pods that gateways select run: one entry
// per namespace and label set, as replicas share their labels.
func (r *Reconciler) gatewayPods(ctx context.Context, selectors []map[string]string) ([]topology.Pod, error) {
	var pods []topology.Pod
	seenSelector, seenPod := map[string]bool{}, map[string]bool{}
	for _, set := range selectors {
		selector := labels.SelectorFromSet(set)
		if len(set) == 0 || seenSelector[selector.String()] {
			continue
		}
		seenSelector[selector.String()] = true
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: selector}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list pods selected by %s: %w", selector, err)
		}
		for _, p := range list.Items {
			key := p.Namespace + "/" + labels.Set(p.Labels).String()
			if !seenPod[key] {
				seenPod[key] = true
				pods = append(pods, topology.Pod{Namespace: p.Namespace, Labels: p.Labels})
			}
		}
	}
	return pods, nil
}

func (r *Reconciler) rootNamespace() string {
	if r.RootNamespace == "" {
		return topology.DefaultRootNamespace
	}
	return r.RootNamespace
}

func (r *Reconciler) writeStatus(ctx context.Context, limit *gatewayv1alpha1.RateLimit, verdicts map[types.NamespacedName]topology.Verdict, failed map[string]error) error {
	v, ok := verdicts[types.NamespacedName{Namespace: limit.Namespace, Name: limit.Name}]
	if !ok {
		return nil // being deleted
	}
	var errs []error
	for _, ef := range v.EnvoyFilters {
		if err := failed[ef]; err != nil {
			errs = append(errs, err)
		}
	}
	updated := limit.DeepCopy()
	updated.Status.ObservedGeneration = limit.Generation
	updated.Status.EnvoyFilters = v.EnvoyFilters
	for _, c := range Conditions(v, errors.Join(errs...), limit.Generation) {
		meta.SetStatusCondition(&updated.Status.Conditions, c)
	}
	if equality.Semantic.DeepEqual(limit.Status, updated.Status) {
		return nil
	}
	err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(limit))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write status of RateLimit %s/%s: %w", limit.Namespace, limit.Name, err)
	}
	if err == nil {
		r.statusWritten(limit, updated)
	}
	return nil
}

// ConfigureCache narrows what the controller caches: only the EnvoyFilters
// it manages, of pods (cluster-wide, as gateway pods may run anywhere) only
// the metadata the topology reads, and of APIRules only what the topology
// reads (StripAPIRule).
func ConfigureCache(opts *cache.Options, apiRulesKnown bool) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&networkingv1alpha3.EnvoyFilter{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{topology.LabelManagedBy: topology.ManagedBy})}
	opts.ByObject[podMetadata()] = cache.ByObject{Transform: StripPod}
	if apiRulesKnown {
		// Only while the CRD is installed: the cache resolves every type it
		// is configured for as it starts.
		opts.ByObject[&gatewayv1alpha1.APIRule{}] = cache.ByObject{Transform: StripAPIRule}
	}
}

func podMetadata() *metav1.PartialObjectMetadata {
	pod := &metav1.PartialObjectMetadata{}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return pod
}

// StripPod keeps of a pod's metadata only its name, namespace, labels and
// resourceVersion, so a cluster-wide pod cache stays small. The informer
// needs resourceVersion: it tells a real update from a resync and tracks
// how far its store has caught up.
func StripPod(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a tombstone: passed through
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// gatewayPodEvents passes only the pod events that can move an EnvoyFilter:
// a pod that a gateway selects appears, goes, or changes its labels. Every
// other pod change in the cluster (status updates above all) is dropped
// here. A pod that shows up before its gateway is still seen: the gateway's
// own event reconciles, and the pod is in the cache by then.
func (r *Reconciler) gatewayPodEvents() predicate.Predicate {
	selected := func(o client.Object) bool {
		if _, ok := o.GetLabels()[gatewayv1alpha1.GatewayNameLabel]; ok && r.GatewayAPIGatewaysKnown {
			// Istio's label on a Gateway API Gateway's pods: any such pod may
			// be a Gateway's, or look like one of another namespace.
			return true
		}
		return r.GatewaysKnown && r.istioGatewaySelects(context.Background(), o.GetLabels())
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return selected(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return selected(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) && (selected(e.ObjectOld) || selected(e.ObjectNew))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// SetupWithManager maps every watched event that can change the topology
// to the World key.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if err := r.setupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := rateLimits.Serve(mgr); err != nil {
		return fmt.Errorf("serve %s: %w", "portico_ratelimits", err)
	}
	if r.latency == nil {
		r.latency = metrics.NewSpecToReady(kindRateLimit)
	}
	// Of a Gateway the topology reads only the spec (an Istio Gateway's
	// selector, a Gateway API Gateway's listeners): status updates, which
	// Istio writes for every route attached to a Gateway API Gateway, pass
	// no further.
	specChanged := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	toWorld := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{World}
	})
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[topology.LabelManagedBy] == topology.ManagedBy
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ratelimit").
		// World and one key per tenant (Reconcile), in the fair queue: one
		// worker computes the world while the others write tenants' work,
		// each tenant's one at a time, the tenants in fair turns.
		WithOptions(fairqueue.Options(controller.Options{MaxConcurrentReconciles: workers})).
		WatchesRawSource(r.work.source()).
		// Every event of a RateLimit times its generation.
		Watches(&gatewayv1alpha1.RateLimit{}, toWorld, builder.WithPredicates(r.latency.Predicate(readyNow))).
		Watches(&networkingv1alpha3.EnvoyFilter{}, toWorld, builder.WithPredicates(managed))
	if r.GatewaysKnown {
		b = b.Watches(&networkingv1.Gateway{}, toWorld, specChanged)
	}
	if r.GatewayAPIGatewaysKnown {
		b = b.Watches(&gatewayapiv1.Gateway{}, toWorld, specChanged)
	}
	if r.GatewaysKnown || r.GatewayAPIGatewaysKnown {
		// Pods matter only through gateways' selectors.
		b = b.Watches(podMetadata(), toWorld, builder.WithPredicates(r.gatewayPodEvents()))
	}
	if r.Global.Enabled {
		// The service's feed and key: repaired when someone changes them.
		b = b.Watches(&corev1.ConfigMap{}, toWorld).Watches(&corev1.Secret{}, toWorld)
	}
	if r.APIRulesKnown {
		// Only APIRules a RateLimit targets, and only changes of what the
		// topology reads of them.
		b = b.Watches(&gatewayv1alpha1.APIRule{}, handler.EnqueueRequestsFromMapFunc(r.targeted), builder.WithPredicates(apiRuleEvents()))
	}
	return b.Complete(r)
}

// Retire deletes every EnvoyFilter the controller wrote (Written, with
// Istio's root namespace root, "" for the default). It runs when the
// controller is disabled or Portico removed: the filters would otherwise
// keep limiting traffic with nobody left to update or remove them (owner
// references cannot reach filters outside their RateLimits' namespace).
func Retire(ctx context.Context, c client.Client, root string) error {
	if root == "" {
		root = topology.DefaultRootNamespace
	}
	var filters networkingv1alpha3.EnvoyFilterList
	if err := c.List(ctx, &filters, ManagedSelector); err != nil {
		return fmt.Errorf("list managed EnvoyFilters: %w", err)
	}
	var errs []error
	for _, ef := range filters.Items {
		if !Written(ef, root) {
			continue
		}
		// The UID precondition keeps a same-named filter created meanwhile
		// by someone else safe.
		err := c.Delete(ctx, ef, client.Preconditions{UID: &ef.UID})
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete EnvoyFilter %s/%s: %w", ef.Namespace, ef.Name, err))
		}
	}
	return errors.Join(errs...)
}
