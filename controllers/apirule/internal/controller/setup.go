package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/hosts"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/controllers/internal/clusterindex"
	"github.com/portico-dev/portico/controllers/internal/fairqueue"
	"github.com/portico-dev/portico/controllers/internal/kinds"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/internal/owned"
)

const (
	serviceIndex = "apirule.services"
	// gatewayIndex finds the APIRules by the gateway they name, as
	// <namespace>/<name>, or defaultGatewayKey when they name none.
	gatewayIndex = "apirule.gateway"
	// defaultGatewayKey is gatewayIndex's key of the APIRules on the
	// default gateway; without a "/" it is no gateway's name.
	defaultGatewayKey = "default"
	// hostIndex finds the APIRules whose hosts may overlap a host, by
	// hostKeys and overlapKeys.
	hostIndex = "apirule.hosts"
	// accessConflictIndex finds the APIRules in AccessConflict, by
	// namespace.
	accessConflictIndex = "apirule.accessConflict"
	// backendNamespaceIndex finds the APIRules by the other namespaces
	// their backends are in.
	backendNamespaceIndex = "apirule.backendNamespaces"
	// ownerIndex finds the Istio objects the controller labelled by the
	// namespace and name of their APIRule.
	ownerIndex = "apirule.owner"
)

// ConfigureCache narrows what the controller caches: of the Istio kinds it
// writes, only the objects it labelled. Others' objects are read past the
// cache, only when they hold a name the controller needs.
func ConfigureCache(opts *cache.Options, installed Installed) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	managed := labels.SelectorFromSet(labels.Set{plan.LabelManagedBy: plan.ManagedBy})
	for _, k := range istioKinds {
		opts.ByObject[k.New()] = cache.ByObject{Label: managed, Transform: observeIstio}
	}
	// Policies stay whole (observeIstio leaves them): the access conflict
	// check reads the live policies of the namespace's other APIRules.
	opts.ByObject[&discoveryv1.EndpointSlice{}] = cache.ByObject{Transform: stripEndpointSlice}
	opts.ByObject[&corev1.Service{}] = cache.ByObject{Transform: stripService}
	if installed.ServiceEntries {
		opts.ByObject[&networkingv1.ServiceEntry{}] = cache.ByObject{Transform: stripServiceEntry}
	}
	if installed.WorkloadEntries {
		opts.ByObject[&networkingv1.WorkloadEntry{}] = cache.ByObject{Transform: stripWorkloadEntry}
	}
	if installed.HTTPRoutes {
		// Every HTTPRoute, as others' routes may share an APIRule's host
		// on its Gateway (HostShared); of those, only what that check reads.
		opts.ByObject[&gwapiv1.HTTPRoute{}] = cache.ByObject{Transform: stripForeignRoute}
		opts.ByObject[&gwapiv1beta1.ReferenceGrant{}] = cache.ByObject{Transform: stripReferenceGrant}
	}
}

// observeIstio keeps of a VirtualService the controller labelled its
// metadata and the hash of its spec (owned.Kind.Observe): the spec is
// compared by that hash and sent whole on an update, the status is read
// by nothing here (and is written by istiod and, with the right to, by
// tenants). Issue 45: the VirtualService, the route with every rule's
// match, was the largest object cached per APIRule. Its policies, the
// AuthorizationPolicies and RequestAuthentications, stay whole: the access
// conflict check (livePolicies) reads the specs of the namespace's others.
func observeIstio(obj any) (any, error) {
	if o, ok := obj.(client.Object); ok {
		observe(o)
	}
	return obj, nil
}

// HandOff are the kinds whose watch events the quarantine guard hands to
// the cache as it decoded them (quarantine.Handoff): every custom resource
// kind the controller watches whole or strips in a transform of its own.
// Issue 45: the APIRules' events alone were a sixth of the controller's
// CPU at 10,000 APIRules, half of it the client's second decode. The
// VirtualServices it labelled are slimmed instead (SlimWatched); Services
// and EndpointSlices come as protobuf, which the guard passes untouched.
var HandOff = []client.Object{
	&porticov1alpha1.APIRule{}, &securityv1.AuthorizationPolicy{}, &securityv1.RequestAuthentication{},
	&gwapiv1.HTTPRoute{}, &gwapiv1beta1.ReferenceGrant{}, &networkingv1.ServiceEntry{}, &networkingv1.WorkloadEntry{},
}

// SlimWatched is the quarantine guard's Options.Slim for the apirule
// controller: the guard decodes every watch event of the VirtualServices
// it labelled anyway, so it hands on what the cache keeps of them
// (observeIstio), and client-go decodes metadata instead of the spec
// again (issue 45: the spec's decode was the bulk of a watch event's CPU).
// Others' objects, and any other kind, pass whole.
func SlimWatched(obj runtime.Object) runtime.Object {
	o, ok := obj.(client.Object)
	if !ok || o.GetLabels()[plan.LabelManagedBy] != plan.ManagedBy || !observe(o) {
		return nil
	}
	return o
}

// observe is observeIstio on an object of any kind: it reports whether o
// is a VirtualService, now observed.
func observe(o client.Object) bool {
	vs, ok := o.(*networkingv1.VirtualService)
	if !ok || !kinds.VirtualServices.Observe(vs) {
		return false
	}
	proto.Reset(&vs.Status)
	return true
}

// stripForeignRoute keeps the whole of an HTTPRoute the controller
// labelled (it compares and updates them) and, of any other, its identity,
// parents and hostnames.
func stripForeignRoute(obj any) (any, error) {
	route, ok := obj.(*gwapiv1.HTTPRoute)
	if !ok {
		return obj, nil
	}
	route.ManagedFields = nil
	if route.Labels[plan.LabelManagedBy] == plan.ManagedBy {
		return route, nil
	}
	out := &gwapiv1.HTTPRoute{TypeMeta: route.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: route.Name, Namespace: route.Namespace, ResourceVersion: route.ResourceVersion, UID: route.UID,
	}}
	out.Spec.ParentRefs, out.Spec.Hostnames = route.Spec.ParentRefs, route.Spec.Hostnames
	return out, nil
}

// stripReferenceGrant keeps a ReferenceGrant's identity and spec.
func stripReferenceGrant(obj any) (any, error) {
	g, ok := obj.(*gwapiv1beta1.ReferenceGrant)
	if !ok {
		return obj, nil
	}
	return &gwapiv1beta1.ReferenceGrant{TypeMeta: g.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: g.Name, Namespace: g.Namespace, ResourceVersion: g.ResourceVersion, UID: g.UID,
	}, Spec: g.Spec}, nil
}

// stripEndpointSlice keeps what the alias check reads: the slice's
// identity and Service label, and of its endpoints only those the check
// refuses (notPodOfNamespace), each reduced to its target's kind and
// namespace. A slice of its own namespace's pods, nearly every one, keeps
// no endpoint: the check finds nothing to refuse in it, as in the whole
// slice.
func stripEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion, UID: s.UID,
	}}
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	for _, ep := range s.Endpoints {
		if !notPodOfNamespace(ep.TargetRef, s.Namespace) {
			continue
		}
		kept := discoveryv1.Endpoint{}
		if ref := ep.TargetRef; ref != nil {
			kept.TargetRef = &corev1.ObjectReference{Kind: ref.Kind, Namespace: ref.Namespace}
		}
		out.Endpoints = append(out.Endpoints, kept)
	}
	return out, nil
}

// notPodOfNamespace reports whether an endpoint's target is anything but
// a pod of namespace (no target, another kind, another namespace's pod):
// what makes a Service an alias for the backend checks.
func notPodOfNamespace(ref *corev1.ObjectReference, namespace string) bool {
	return ref == nil || ref.Kind != "Pod" || (ref.Namespace != "" && ref.Namespace != namespace)
}

// stripService keeps what the backend checks read of a Service, of which
// the cache holds every one of the cluster: its identity, the consent
// annotation, its type, ExternalName and pod selector. The rest (ports,
// addresses, status, the last-applied-configuration annotation, often the
// largest part) is the bulk of a Service and read by nothing here.
func stripService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	out := &corev1.Service{TypeMeta: svc.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: svc.Name, Namespace: svc.Namespace, ResourceVersion: svc.ResourceVersion, UID: svc.UID,
		DeletionTimestamp: svc.DeletionTimestamp,
	}}
	if v, ok := svc.Annotations[porticov1alpha1.AnnotationAllowedAPIRuleNamespaces]; ok {
		out.Annotations = map[string]string{porticov1alpha1.AnnotationAllowedAPIRuleNamespaces: v}
	}
	out.Spec.Type, out.Spec.ExternalName, out.Spec.Selector = svc.Spec.Type, svc.Spec.ExternalName, svc.Spec.Selector
	return out, nil
}

// stripWorkloadEntry keeps a WorkloadEntry's identity and labels.
func stripWorkloadEntry(obj any) (any, error) {
	we, ok := obj.(*networkingv1.WorkloadEntry)
	if !ok {
		return obj, nil
	}
	return &networkingv1.WorkloadEntry{TypeMeta: we.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: we.Name, Namespace: we.Namespace, Labels: we.Labels, ResourceVersion: we.ResourceVersion, UID: we.UID,
	}}, nil
}

// stripServiceEntry keeps a ServiceEntry's identity and hosts.
func stripServiceEntry(obj any) (any, error) {
	se, ok := obj.(*networkingv1.ServiceEntry)
	if !ok {
		return obj, nil
	}
	out := &networkingv1.ServiceEntry{TypeMeta: se.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: se.Name, Namespace: se.Namespace, ResourceVersion: se.ResourceVersion, UID: se.UID,
	}}
	out.Spec.Hosts = se.Spec.Hosts
	return out, nil
}

// SetupWithManager registers the reconciler and its watches: APIRules, the
// Istio objects they labelled (in any namespace), the Services they route
// to and, when checked, the Gateways they use and the APIGateway (grants
// and the default gateway).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	// Every lookup of these indexes is across namespaces (which APIRules,
	// in any namespace, use this Service, host, Gateway; which objects an
	// APIRule wrote, wherever): only that half of each is kept.
	for _, index := range r.indexes() {
		if err := clusterindex.Field(ctx, mgr.GetCache(), index.obj, index.name, index.keys); err != nil {
			return err
		}
	}
	r.cache = mgr.GetCache()
	writes, err := owned.MetadataAnswers(r.Client, mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	r.writes = writes
	if err := apiRules.Serve(mgr); err != nil {
		return fmt.Errorf("serve %s: %w", "portico_apirules", err)
	}
	if r.latency == nil {
		r.latency = metrics.NewSpecToReady(kindAPIRule)
	}
	m := mapper{c: mgr.GetClient(), readGrants: r.Installed.APIGateways}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("apirule").
		// APIRules are independent and a reconcile mostly waits for the API
		// server: enough workers keep it busy (measured by make
		// bench-controllers, issue #17). The namespaces take turns, so one
		// tenant's backlog does not hold up another's APIRule (issue #26).
		// A failed APIRule is retried within backoff.Max, however long the
		// API server was away (issue #40).
		WithOptions(fairqueue.Options(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles})).
		// Every event of an APIRule times its generation (first, as the
		// next predicate drops some). Its own finalizer and status writes
		// start no reconcile; the objects it writes requeue it only when
		// others change them.
		For(&porticov1alpha1.APIRule{}, builder.WithPredicates(r.latency.Predicate(readyNow), r.written.notOwnWrite())).
		Watches(&porticov1alpha1.APIRule{}, handler.EnqueueRequestsFromMapFunc(m.overlappingHosts)).
		Watches(&networkingv1.VirtualService{}, r.written.exceptOwner(handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return toAPIRuleRequests(o)
		}))).
		Watches(&securityv1.AuthorizationPolicy{}, r.written.exceptOwner(handler.EnqueueRequestsFromMapFunc(m.policyEvents))).
		Watches(&securityv1.RequestAuthentication{}, r.written.exceptOwner(handler.EnqueueRequestsFromMapFunc(m.policyEvents))).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(m.byIndex(serviceIndex))).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(m.endpoints))
	if r.Installed.APIGateways {
		// Its spec matters, and of its status only which default gateway
		// the gateway controller keeps (APIGateway.DefaultGateway): the rest
		// of the status changes nothing for APIRules.
		b = b.Watches(&operatorv1alpha1.APIGateway{}, handler.EnqueueRequestsFromMapFunc(m.apiGateway), builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				oldGW, newGW := e.ObjectOld.(*operatorv1alpha1.APIGateway), e.ObjectNew.(*operatorv1alpha1.APIGateway)
				before, _, _ := oldGW.DefaultGateway()
				after, _, _ := newGW.DefaultGateway()
				return before != after || oldGW.DefaultGatewayAPI() != newGW.DefaultGatewayAPI()
			}},
		)))
	}
	if r.Installed.HTTPRoutes {
		// The route's status is the Gateway's answer (readiness); a grant
		// concerns the APIRules routing into its namespace.
		b = b.Watches(&gwapiv1.HTTPRoute{}, r.written.exceptOwner(routeEvents(m))).
			Watches(&gwapiv1beta1.ReferenceGrant{}, handler.EnqueueRequestsFromMapFunc(m.byNamespaceIndex(backendNamespaceIndex)))
	}
	if r.Installed.GatewayAPIGateways {
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "Gateway"})
		b = b.Watches(gw, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			reqs := requests(m.list(ctx, client.MatchingFields{gatewayIndex: gatewayAPIKey(o.GetNamespace(), o.GetName())}), nil)
			if m.isDefaultGateway(ctx, o.GetNamespace(), o.GetName()) {
				// It may be the default gateway, of the APIRules naming none.
				reqs = append(reqs, requests(m.list(ctx, client.MatchingFields{gatewayIndex: defaultGatewayKey}), nil)...)
			}
			return reqs
		}))
	}
	if r.Installed.IstioGateways {
		// A Gateway that appears ends a GatewayNotFound (the default
		// gateway's, above all, which its controller may create after the
		// APIRules); one that goes makes its APIRules report it.
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Gateway"))
		b = b.Watches(gw, handler.EnqueueRequestsFromMapFunc(m.gateways))
	}
	// Tenants write ServiceEntries and WorkloadEntries: each maps to the
	// APIRules of the Services it may alias, never to every APIRule.
	if r.Installed.ServiceEntries {
		b = b.Watches(&networkingv1.ServiceEntry{}, handler.EnqueueRequestsFromMapFunc(m.serviceEntries))
	}
	if r.Installed.WorkloadEntries {
		b = b.Watches(&networkingv1.WorkloadEntry{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return m.backendsIn(ctx, o.GetNamespace())
		}))
	}
	return b.Complete(r)
}

// answerPriority is the queue priority of an APIRule whose HTTPRoute the
// Gateway's controller just answered about: above every other event's (0).
const answerPriority = 10

// routeEvents maps HTTPRoute events as mapper.routes does, except that the
// Gateway's answer about one of the controller's routes (a change of its
// status alone) puts the APIRule ahead of the queue: its readiness is all
// that is left to decide, and behind a burst of new APIRules it would
// otherwise wait for all of them (make bench-controllers, phase 1h).
func routeEvents(m mapper) handler.EventHandler {
	mapped := handler.EnqueueRequestsFromMapFunc(m.routes)
	return handler.Funcs{
		CreateFunc: mapped.Create, DeleteFunc: mapped.Delete, GenericFunc: mapped.Generic,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			before, okBefore := e.ObjectOld.(*gwapiv1.HTTPRoute)
			after, okAfter := e.ObjectNew.(*gwapiv1.HTTPRoute)
			pq, isPriority := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if okBefore && okAfter && isPriority && before.Generation == after.Generation &&
				!equality.Semantic.DeepEqual(before.Status, after.Status) {
				if reqs := toAPIRuleRequests(after); len(reqs) > 0 {
					pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(answerPriority)}, reqs...)
					return
				}
			}
			mapped.Update(ctx, e, q)
		},
	}
}

// maxConcurrentReconciles is the number of workers.
const maxConcurrentReconciles = 16

// fieldIndex is a cache index: the keys of obj's kind under name.
type fieldIndex struct {
	obj  client.Object
	name string
	keys client.IndexerFunc
}

// indexes are the cache indexes the reconciler and the mapper read, of
// the kinds the reconciler's options say are installed.
func (r *Reconciler) indexes() []fieldIndex {
	rule := func(f func(*porticov1alpha1.APIRule) []string) client.IndexerFunc {
		return func(o client.Object) []string { return f(o.(*porticov1alpha1.APIRule)) }
	}
	out := []fieldIndex{
		{&porticov1alpha1.APIRule{}, serviceIndex, rule(func(a *porticov1alpha1.APIRule) []string {
			var keys []string
			for _, s := range plan.Backends(a) {
				keys = append(keys, s.String())
			}
			return keys
		})},
		{&porticov1alpha1.APIRule{}, backendNamespaceIndex, rule(func(a *porticov1alpha1.APIRule) []string {
			var keys []string
			for _, s := range plan.Backends(a) {
				if s.Namespace != a.Namespace && !slices.Contains(keys, s.Namespace) {
					keys = append(keys, s.Namespace)
				}
			}
			return keys
		})},
		{&porticov1alpha1.APIRule{}, gatewayIndex, rule(func(a *porticov1alpha1.APIRule) []string {
			if p := plan.Parent(a); p != nil {
				return []string{gatewayAPIKey(p.Namespace, p.Name)}
			}
			if a.Spec.Gateway != "" {
				return []string{a.Spec.Gateway}
			}
			return []string{defaultGatewayKey}
		})},
		{&porticov1alpha1.APIRule{}, hostIndex, rule(hostKeys)},
		{&porticov1alpha1.APIRule{}, accessConflictIndex, rule(func(a *porticov1alpha1.APIRule) []string {
			if c := meta.FindStatusCondition(a.Status.Conditions, porticov1alpha1.ConditionReady); c != nil && c.Reason == porticov1alpha1.ReasonAccessConflict {
				return []string{a.Namespace}
			}
			return nil
		})},
		{&discoveryv1.EndpointSlice{}, endpointSliceIndex, endpointSliceKey},
	}
	for _, k := range r.listed() {
		out = append(out, fieldIndex{k.New(), ownerIndex, ownerKey})
	}
	if r.Installed.ServiceEntries {
		out = append(out, fieldIndex{&networkingv1.ServiceEntry{}, serviceEntryHostIndex, serviceEntryHostKeys})
	}
	if r.Installed.HTTPRoutes {
		out = append(out, fieldIndex{&gwapiv1.HTTPRoute{}, routeHostIndex, routeHostKeys})
	}
	return out
}

// gatewayAPIKey is gatewayIndex's key of a Gateway API Gateway: the group
// keeps it apart from an Istio Gateway's <namespace>/<name>.
func gatewayAPIKey(namespace, name string) string {
	return porticov1alpha1.GatewayAPIGroup + "/" + namespace + "/" + name
}

// ownerKey is ownerIndex's key of an object the controller labelled: the
// namespace and name of its APIRule (ownedBy), as the label selector of
// deleteUnwanted matches it. The namespace is part of the key so that a
// name many tenants use (api, web) does not make every one of their
// reconciles walk the objects of all the others.
func ownerKey(o client.Object) []string {
	l := o.GetLabels()
	if l[plan.LabelManagedBy] != plan.ManagedBy || l[plan.LabelAPIRule] == "" || l[plan.LabelAPIRuleNamespace] != o.GetNamespace() {
		// Another namespace's object is never the APIRule's (owns): a
		// tenant's flood of look-alikes naming another's APIRule must not
		// lengthen that APIRule's every pass.
		return nil
	}
	return []string{l[plan.LabelAPIRuleNamespace] + "/" + l[plan.LabelAPIRule]}
}

// ownedBy is ownerIndex's key of the objects of rule.
func ownedBy(rule *porticov1alpha1.APIRule) string {
	return rule.Namespace + "/" + rule.Name
}

// hostKeys are hostIndex's keys of an APIRule: per host "h:" and the host,
// and "u:" and every name the host lies under (a proper suffix of the host
// without its "*.").
func hostKeys(rule *porticov1alpha1.APIRule) []string {
	var keys []string
	for _, h := range rule.Spec.Hosts {
		host := string(h)
		keys = append(keys, "h:"+host)
		for _, s := range properSuffixes(strings.TrimPrefix(host, "*.")) {
			keys = append(keys, "u:"+s)
		}
	}
	return keys
}

// overlapKeys are the hostIndex keys of every APIRule whose hosts may
// overlap one of rule's (hosts.Overlap): the same host, a wildcard over
// it, and for a wildcard the hosts under it.
func overlapKeys(rule *porticov1alpha1.APIRule) []string {
	var keys []string
	for _, h := range rule.Spec.Hosts {
		host := string(h)
		base := strings.TrimPrefix(host, "*.")
		keys = append(keys, "h:"+host)
		for _, s := range properSuffixes(base) {
			keys = append(keys, "h:*."+s)
		}
		if hosts.IsWildcard(host) {
			keys = append(keys, "u:"+base)
		}
	}
	return keys
}

// properSuffixes returns the names a host lies under: "b.c" and "c" for
// "a.b.c".
func properSuffixes(host string) []string {
	var out []string
	for i := strings.IndexByte(host, '.'); i >= 0; {
		host = host[i+1:]
		out = append(out, host)
		i = strings.IndexByte(host, '.')
	}
	return out
}

// mapper maps events to the APIRules they concern, from the cache's
// indexes.
type mapper struct {
	c client.Client
	// readGrants: the APIGateway, which names the default gateway, is
	// read (Reconciler.Installed.APIGateways).
	readGrants bool
}

// list lists APIRules read-only: it shares the cache's objects rather
// than copy them all.
func (m mapper) list(ctx context.Context, opts ...client.ListOption) []porticov1alpha1.APIRule {
	var rules porticov1alpha1.APIRuleList
	if err := m.c.List(ctx, &rules, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil
	}
	return rules.Items
}

// requests are the requests of the rules that keep (nil: all) accepts.
func requests(rules []porticov1alpha1.APIRule, keep func(*porticov1alpha1.APIRule) bool) []reconcile.Request {
	var reqs []reconcile.Request
	for i := range rules {
		if keep == nil || keep(&rules[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rules[i])})
		}
	}
	return reqs
}

// byIndex maps an object to the APIRules whose index names it.
func (m mapper) byIndex(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return requests(m.list(ctx, client.MatchingFields{index: o.GetNamespace() + "/" + o.GetName()}), nil)
	}
}

// byNamespaceIndex maps an object to the APIRules whose index names its
// namespace.
func (m mapper) byNamespaceIndex(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return requests(m.list(ctx, client.MatchingFields{index: o.GetNamespace()}), nil)
	}
}

// overlappingHosts maps an APIRule to its hosts' other claimants: when one
// comes or goes, the others decide again.
func (m mapper) overlappingHosts(ctx context.Context, o client.Object) []reconcile.Request {
	changed := o.(*porticov1alpha1.APIRule)
	seen := map[types.UID]bool{changed.UID: true}
	var reqs []reconcile.Request
	for _, key := range overlapKeys(changed) {
		reqs = append(reqs, requests(m.list(ctx, client.MatchingFields{hostIndex: key}), func(a *porticov1alpha1.APIRule) bool {
			if seen[a.UID] {
				return false
			}
			seen[a.UID] = true
			return hostsOverlap(a, changed)
		})...)
	}
	return reqs
}

// policyEvents maps a policy to its APIRule and, as policies going away
// may end an AccessConflict of the namespace, to the APIRules of the
// namespace in AccessConflict.
func (m mapper) policyEvents(ctx context.Context, o client.Object) []reconcile.Request {
	return append(toAPIRuleRequests(o), requests(m.list(ctx, client.MatchingFields{accessConflictIndex: o.GetNamespace()}), nil)...)
}

// apiGateway: the APIGateway's host ownership and its default gateway's
// health host concern every APIRule (its wildcard grants and default
// gateway a subset, but the administrator's edits are rare, and the
// watch's predicate passes only those that matter).
func (m mapper) apiGateway(ctx context.Context, _ client.Object) []reconcile.Request {
	return requests(m.list(ctx), nil)
}

// gateways: a Gateway concerns the APIRules naming it and, when it is the
// default gateway, those naming none.
func (m mapper) gateways(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := m.byIndex(gatewayIndex)(ctx, o)
	if m.isDefaultGateway(ctx, o.GetNamespace(), o.GetName()) {
		reqs = append(reqs, requests(m.list(ctx, client.MatchingFields{gatewayIndex: defaultGatewayKey}), nil)...)
	}
	return reqs
}

// isDefaultGateway reports whether the APIGateway makes the Gateway
// <namespace>/<name> the default gateway, of the APIRules naming none: a
// Gateway of another namespace with its name concerns none of them (any
// tenant may create one). When the APIGateway names another, its own event
// (apiGateway) brings them all when that changes; when it cannot be read,
// the answer is yes.
func (m mapper) isDefaultGateway(ctx context.Context, namespace, name string) bool {
	if name != operatorv1alpha1.DefaultGatewayName || !m.readGrants {
		return false
	}
	gw := &operatorv1alpha1.APIGateway{}
	if err := m.c.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
		return !apierrors.IsNotFound(err)
	}
	def, _, ok := gw.DefaultGateway()
	return ok && def == namespace+"/"+name
}

// serviceEntries maps a ServiceEntry to the APIRules of the Services it
// may declare a name of (serviceEntryTargets).
func (m mapper) serviceEntries(ctx context.Context, o client.Object) []reconcile.Request {
	se, ok := o.(*networkingv1.ServiceEntry)
	if !ok {
		return nil
	}
	services, namespace := serviceEntryTargets(se)
	var reqs []reconcile.Request
	for _, svc := range services {
		reqs = append(reqs, requests(m.list(ctx, client.MatchingFields{serviceIndex: svc}), nil)...)
	}
	if namespace != "" {
		reqs = append(reqs, m.backendsIn(ctx, namespace)...)
	}
	return reqs
}

// backendsIn maps to the APIRules with a backend in the namespace: those
// of the namespace that route to one of its Services, and those of others
// that route into it.
func (m mapper) backendsIn(ctx context.Context, namespace string) []reconcile.Request {
	reqs := requests(m.list(ctx, client.InNamespace(namespace)), func(a *porticov1alpha1.APIRule) bool {
		return slices.ContainsFunc(plan.Backends(a), func(s types.NamespacedName) bool { return s.Namespace == namespace })
	})
	return append(reqs, requests(m.list(ctx, client.MatchingFields{backendNamespaceIndex: namespace}), nil)...)
}

// endpoints maps an EndpointSlice to the APIRules routing to its Service.
func (m mapper) endpoints(ctx context.Context, o client.Object) []reconcile.Request {
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	return requests(m.list(ctx, client.MatchingFields{serviceIndex: o.GetNamespace() + "/" + svc}), nil)
}

// toAPIRuleRequests maps an object the controller labelled to its APIRule.
// Only an object in the APIRule's own namespace can be the APIRule's (owns):
// a labelled object of another namespace, which its tenant may write and
// rewrite at will, starts no reconcile of another tenant's APIRule.
func toAPIRuleRequests(o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[plan.LabelManagedBy] != plan.ManagedBy || l[plan.LabelAPIRule] == "" {
		return nil
	}
	ns := l[plan.LabelAPIRuleNamespace]
	if ns == "" {
		ns = o.GetNamespace()
	}
	if ns != o.GetNamespace() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: l[plan.LabelAPIRule]}}}
}
