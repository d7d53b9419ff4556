package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/controllers/apirule/internal/translate"
	"github.com/portico-dev/portico/controllers/internal/kinds"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/owned"
)

const (
	// FieldManager is the apirule controller's identity in managedFields.
	FieldManager = "apirule-controller"
	// Finalizer keeps an APIRule that has written objects until the
	// controller has deleted every one of them and seen them gone: its
	// hosts stay claimed until then (the next claimant waits, so two
	// tenants' routes are never live for one host) and nothing depends on
	// the garbage collector's timing.
	Finalizer = "gateway.portico.dev/apirule-cleanup"
	// releaseRetry is how often a deleting or refused APIRule looks again
	// while an object of its own is still being deleted (another's
	// finalizer holds it).
	releaseRetry = 2 * time.Second
	// conflictRetry is how often an APIRule in Conflict looks again: the
	// object in the way is not cached (it is not labelled as ours), so its
	// removal raises no event.
	conflictRetry = time.Minute
	// routeAnswerWait is how long an APIRule whose HTTPRoute was just
	// written waits for its Gateway's answer before it reports
	// RoutePending: the answer usually comes first (its event starts the
	// reconcile that reports it), and the pending status write is saved.
	routeAnswerWait = 10 * time.Second
)

// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules/finalizers,verbs=update
// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=security.istio.io,resources=authorizationpolicies;requestauthentications,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.istio.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.istio.io,resources=serviceentries;workloadentries,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways,verbs=get;list;watch

// Reconciler reconciles APIRules.
type Reconciler struct {
	Client client.Client
	// Reader reads past the cache, which holds only the Istio objects the
	// controller labelled: it finds other objects that hold a name the
	// controller needs, and objects the cache has not seen yet.
	Reader client.Reader
	// Installed is which optional CRDs the controller can use.
	Installed Installed
	// Recorder reports objects that only look like the controller's
	// (EventLookAlikeIgnored); nil records nothing.
	Recorder events.EventRecorder

	// cache is the manager's cache, with the indexes of SetupWithManager,
	// that Client reads.
	cache client.Reader
	// writes is Client with its writes answered by the API server with
	// metadata only (owned.MetadataAnswers), set by SetupWithManager: the
	// controller reads nothing but the metadata of what it wrote (its
	// version for the own-write filter, its UID for ownership). Nil writes
	// through Client.
	writes client.Client
	// objects writes and removes the APIRules' objects (see writer); its
	// tombstones keep a cached copy of an object it deleted from counting
	// as live, so a status never says Applied for an object that is gone.
	objects     *owned.Writer
	objectsOnce sync.Once
	// written remembers the versions the controller wrote, whose watch
	// events start no reconcile of the APIRule that wrote them.
	written ownWrites
	// latency times each APIRule generation from its first sighting to
	// Ready (portico_spec_to_ready_seconds); nil until SetupWithManager.
	latency *metrics.SpecToReady
}

// Reconcile converges one APIRule's Istio objects.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	rule := &porticov1alpha1.APIRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rule); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("apirule", klog.KObj(rule))
	ctx = ctrl.LoggerInto(ctx, log)
	if !rule.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, rule)
	}

	before := rule.DeepCopy()
	// parent is the Gateway API Gateway of an APIRule in HTTPRoute mode
	// (its parentRef, or the default gateway when that is one).
	var parent *porticov1alpha1.ParentReference
	// awaitingAnswer: the status waits for the Gateway's answer (apply).
	var awaitingAnswer bool
	defer func() {
		if awaitingAnswer {
			return
		}
		// Left to right: the HostShared condition, then the status write.
		retErr = errors.Join(retErr, r.setHostShared(ctx, rule, parent), r.writeStatus(ctx, before, rule))
	}()

	// One read of the administrator's configuration serves the gateway
	// resolution and the host grants.
	apiGateway, err := r.apiGateway(ctx)
	if err != nil {
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	if h := reservedHost(rule, apiGateway); h != "" {
		return r.refuse(ctx, rule, porticov1alpha1.ReasonHostReserved, fmt.Sprintf(
			"host %s is the default gateway's own health check, reserved on every gateway; use another name; the APIRule's Istio objects were removed", h))
	}
	gateway, parent, reason, msg := gatewayOf(rule, apiGateway)
	if reason != "" {
		parent = nil
		return r.refuse(ctx, rule, reason, msg)
	}
	if parent != nil && !r.Installed.HTTPRoutes {
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonGatewayAPINotInstalled, fmt.Sprintf(
			"the APIRule's gateway is a Gateway API Gateway (its spec.parentRef, or the default gateway), but the Gateway API's CRDs %s and %s are not installed; it is applied once they are, its objects are left unchanged",
			contract.HTTPRoutes, contract.ReferenceGrants))
		return ctrl.Result{}, nil
	}
	var grants *operatorv1alpha1.APIRulesSpec
	if apiGateway != nil {
		grants = apiGateway.Spec.APIRules
	}
	reason, msg, err = r.checkHosts(ctx, rule, grants)
	if err != nil {
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	if reason != "" {
		return r.refuse(ctx, rule, reason, msg)
	}
	if msg := ungrantedAuthorizers(rule, grants); msg != "" {
		return r.refuse(ctx, rule, porticov1alpha1.ReasonAuthorizerNotPermitted, msg)
	}
	selectors, reason, msg := r.checkReferences(ctx, rule, gateway, parent)
	if reason != "" {
		if withdraws(reason) {
			return r.refuse(ctx, rule, reason, msg)
		}
		setReady(rule, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, nil
	}
	out, err := translate.Translate(translate.Input{APIRule: rule, Selectors: selectors, Gateway: gateway, Parent: parent, TrustedProxies: trustedProxies(grants)})
	if err != nil {
		return r.refuseInvalid(ctx, rule, err)
	}
	if msg, err := r.checkAccess(ctx, rule, out); err != nil || msg != "" {
		if err != nil {
			setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, err.Error())
			return ctrl.Result{}, err
		}
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonAccessConflict, msg)
		return ctrl.Result{}, nil
	}
	result, awaitingAnswer, retErr = r.apply(ctx, rule, out, parent)
	return result, retErr
}

// apply writes the desired objects of a translated APIRule and reports
// the outcome: Applied, or in HTTPRoute mode the Gateway's answer. It
// reports awaitingAnswer, and sets no condition, when a new APIRule's
// route was created just now: its status cannot hold the Gateway's answer
// yet, and that answer's event starts the reconcile that reports it, with
// the APIRule's first status (Applied, RouteNotAccepted, and HostShared).
// RoutePending is written only if no answer comes within routeAnswerWait.
func (r *Reconciler) apply(ctx context.Context, rule *porticov1alpha1.APIRule, out translate.Output, parent *porticov1alpha1.ParentReference) (_ ctrl.Result, awaitingAnswer bool, _ error) {
	desired := desiredObjects(out)
	// An APIRule found in Conflict looks for the object in the way past
	// the cache before writing anything: the conflict most likely stays, and
	// creating its other objects only to delete them again is churn.
	pastCache := readyReason(rule) == porticov1alpha1.ReasonConflict
	live, conflicts, err := r.writer().Live(ctx, ownership(rule), desired, pastCache)
	if err != nil {
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, false, err
	}
	if len(conflicts) > 0 {
		setConflict(rule, conflicts)
		return ctrl.Result{RequeueAfter: conflictRetry}, false, nil
	}
	// The route is the last object written; a live route that needs no
	// write carries the Gateway's answer about the current version.
	route, _ := live[len(live)-1].(*gwapiv1.HTTPRoute)
	newRoute := out.HTTPRoute != nil && route == nil
	if route != nil && !upToDate(desired[len(desired)-1], route) {
		route = nil
	}
	conflict, err := r.converge(ctx, rule, desired, live)
	if conflict != "" {
		result, err := r.conflicted(ctx, rule, desired, conflict, err)
		return result, false, err
	}
	if err != nil {
		if reason, msg, ok := invalidRoute(err); ok {
			setReady(rule, metav1.ConditionFalse, reason, msg)
			return ctrl.Result{}, false, nil
		}
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, err.Error())
		return ctrl.Result{}, false, err
	}
	if out.HTTPRoute != nil {
		if newRoute && readyReason(rule) == "" {
			return ctrl.Result{RequeueAfter: routeAnswerWait}, true, nil
		}
		reason, msg := porticov1alpha1.ReasonRoutePending, routeWritten(out.HTTPRoute, parent)
		if route != nil {
			reason, msg = routeReadiness(route, parent)
		}
		if reason != "" {
			// Not an error: the route's status change starts the next reconcile.
			setReady(rule, metav1.ConditionFalse, reason, msg)
			return ctrl.Result{}, false, nil
		}
	}
	setReady(rule, metav1.ConditionTrue, porticov1alpha1.ReasonApplied, appliedMessage(desired))
	return ctrl.Result{}, false, nil
}

// conflicted reports the Conflict that a create met (the object in the
// way was not cached) once the objects this pass created are deleted
// again; the message names every object in the way, as a check before
// writing would have.
func (r *Reconciler) conflicted(ctx context.Context, rule *porticov1alpha1.APIRule, desired []client.Object, conflict string, undoErr error) (ctrl.Result, error) {
	if undoErr != nil {
		// Objects of this pass that could not be deleted: ApplyFailed,
		// retried until they are gone or the conflict is.
		setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonApplyFailed, undoErr.Error())
		return ctrl.Result{}, undoErr
	}
	conflicts := []string{conflict}
	if _, all, err := r.writer().Live(ctx, ownership(rule), desired, true); err == nil && len(all) > 0 {
		conflicts = all
	}
	setConflict(rule, conflicts)
	return ctrl.Result{RequeueAfter: conflictRetry}, nil
}

// setConflict reports the objects in the way of the APIRule.
func setConflict(rule *porticov1alpha1.APIRule, conflicts []string) {
	setReady(rule, metav1.ConditionFalse, porticov1alpha1.ReasonConflict, strings.Join(conflicts, "; ")+
		" and was not created for this APIRule: it is left untouched, and nothing is written until it is removed or renamed")
}

// readyReason is the reason of the APIRule's Ready condition, or "".
func readyReason(rule *porticov1alpha1.APIRule) string {
	if c := meta.FindStatusCondition(rule.Status.Conditions, porticov1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// invalidRoute turns the API server's refusal of an HTTPRoute (its CRD's
// validation, which Translate does not repeat in full) into InvalidRule:
// the APIRule asks for something the Gateway API cannot say, which no
// retry will change.
func invalidRoute(err error) (string, string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil ||
		status.Status().Details.Kind != "HTTPRoute" {
		return "", "", false
	}
	return porticov1alpha1.ReasonInvalidRule, "the API server refused the APIRule's HTTPRoute: " + err.Error() +
		"; change the APIRule so that its HTTPRoute is valid; the objects were left unchanged", true
}

// desiredObjects orders the objects for writing: access control before the
// route (the VirtualService or HTTPRoute), so that a new route never
// reaches pods before their policies are in place.
func desiredObjects(out translate.Output) []client.Object {
	var objs []client.Object
	for _, w := range out.Workloads {
		if w.RequestAuthentication != nil {
			objs = append(objs, w.RequestAuthentication)
		}
		// The authorizer is in place before the ALLOW policy admits its
		// paths.
		if w.CustomPolicy != nil {
			objs = append(objs, w.CustomPolicy)
		}
		objs = append(objs, w.AuthorizationPolicy)
	}
	return append(objs, out.Route().(client.Object))
}

// checkReferences returns the pod selector of every backend Service, or the
// reason and message of a reference that cannot be followed: a Service, or
// the Istio Gateway (as <namespace>/<name>) that serves the APIRule.
func (r *Reconciler) checkReferences(ctx context.Context, rule *porticov1alpha1.APIRule, gateway string, parent *porticov1alpha1.ParentReference) (map[types.NamespacedName]map[string]string, string, string) {
	selectors := map[types.NamespacedName]map[string]string{}
	for _, ref := range plan.Backends(rule) {
		svc := &corev1.Service{}
		err := r.Client.Get(ctx, ref, svc)
		if ref.Namespace != rule.Namespace {
			consents, how, cerr := r.consents(ctx, rule, parent, svc, err)
			if cerr != nil {
				return nil, porticov1alpha1.ReasonApplyFailed, cerr.Error()
			}
			if !consents {
				// One message for both: the APIRule's author learns nothing
				// about Services of other namespaces that do not consent.
				return nil, porticov1alpha1.ReasonReferenceNotPermitted, fmt.Sprintf(
					"service %s does not exist or does not allow APIRules of namespace %s (%s); the APIRule's objects were removed", ref, rule.Namespace, how)
			}
		}
		if apierrors.IsNotFound(err) {
			return nil, porticov1alpha1.ReasonServiceNotFound,
				fmt.Sprintf("service %s not found; the Istio objects were left unchanged", ref)
		}
		if err != nil {
			return nil, porticov1alpha1.ReasonApplyFailed, fmt.Sprintf("read service %s: %v", ref, err)
		}
		alias, err := r.aliasOf(ctx, svc)
		if err != nil {
			return nil, porticov1alpha1.ReasonApplyFailed, err.Error()
		}
		if alias != "" {
			return nil, porticov1alpha1.ReasonBackendNotPermitted, fmt.Sprintf(
				"service %s %s, so traffic routed to it would not land on the pods the access rules protect; the APIRule's Istio objects were removed", ref, alias)
		}
		selectors[ref] = svc.Spec.Selector
	}
	if parent != nil {
		if reason, msg := r.checkParent(ctx, parent); reason != "" {
			return nil, reason, msg
		}
		return selectors, "", ""
	}
	if r.Installed.IstioGateways {
		ns, name := splitGateway(gateway)
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Gateway"))
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); apierrors.IsNotFound(err) {
			return nil, porticov1alpha1.ReasonGatewayNotFound,
				fmt.Sprintf("Istio gateway %s not found; the Istio objects were left unchanged", gateway)
		}
	}
	return selectors, "", ""
}

// permits reports whether a Service consents to APIRules of namespace ns.
func permits(svc *corev1.Service, ns string) bool {
	for _, allowed := range strings.Split(svc.Annotations[porticov1alpha1.AnnotationAllowedAPIRuleNamespaces], ",") {
		if allowed = strings.TrimSpace(allowed); allowed == "*" || allowed == ns {
			return true
		}
	}
	return false
}

func splitGateway(ref string) (string, string) {
	for i := range ref {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:]
		}
	}
	return "", ref
}

// owns reports whether the controller wrote obj for rule: it writes only
// in the APIRule's namespace (consent to route to another namespace's
// Service is not consent to write there), each object controlled by the
// APIRule (by UID, so not a former APIRule of the same name). Labels are a
// claim, never a proof: anyone who writes a namespace can copy them, so an
// object elsewhere that names the APIRule is never the controller's.
func owns(rule *porticov1alpha1.APIRule, obj client.Object) bool {
	return ownership(rule)(obj)
}

func ownership(rule *porticov1alpha1.APIRule) owned.Owns {
	return owned.ControlledBy(rule, rule.Namespace)
}

// labelledFor reports whether obj's labels name rule.
func labelledFor(rule *porticov1alpha1.APIRule, obj client.Object) bool {
	l := obj.GetLabels()
	return l[plan.LabelManagedBy] == plan.ManagedBy && l[plan.LabelAPIRule] == rule.Name &&
		l[plan.LabelAPIRuleNamespace] == rule.Namespace
}

// converge writes the desired objects and deletes this APIRule's objects
// that are no longer desired. The finalizer goes on before the first object
// is written (with the APIRule's resourceVersion: an APIRule the cache
// still shows but that changed or went meanwhile writes nothing); it comes
// off when the APIRule is deleted or refused, once its objects are gone.
//
// A create that finds another's object in the way (the cache, which holds
// only the controller's objects, could not show it) stops the pass: nothing
// more is written (the route, last, never reaches pods without their
// access control), the objects this pass created are deleted again, and
// converge returns the conflict with the error of that deletion.
func (r *Reconciler) converge(ctx context.Context, rule *porticov1alpha1.APIRule, desired, live []client.Object) (string, error) {
	if err := r.setFinalizer(ctx, rule, true); err != nil {
		return "", err
	}
	var errs []error
	var created []client.Object
	for i, d := range desired {
		if i == len(desired)-1 && len(errs) > 0 {
			// Never route to pods whose access control could not be written.
			break
		}
		obj, conflict, err := r.writer().Write(ctx, ownership(rule), d, live[i])
		if obj != nil {
			created = append(created, obj)
		}
		if conflict != "" {
			_, err := r.writer().Delete(ctx, ownership(rule), created, nil)
			return conflict, err
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	keep := map[string]bool{}
	for _, d := range desired {
		keep[objectID(d)] = true
	}
	return "", r.deleteUnwanted(ctx, rule, r.Client, keep)
}

// deleteUnwanted deletes the objects of rule, read through reader, that
// are not in keep. Objects that are not the APIRule's are never deleted,
// whatever their labels.
func (r *Reconciler) deleteUnwanted(ctx context.Context, rule *porticov1alpha1.APIRule, reader client.Reader, keep map[string]bool) error {
	var selector client.ListOption = client.MatchingLabels{plan.LabelManagedBy: plan.ManagedBy,
		plan.LabelAPIRule: rule.Name, plan.LabelAPIRuleNamespace: rule.Namespace}
	if r.cache != nil && reader == client.Reader(r.Client) {
		// The same objects, from the cache's index rather than by matching
		// the labels of every object the controller wrote.
		reader, selector = r.cache, client.MatchingFields{ownerIndex: ownedBy(rule)}
	}
	objs, err := r.listed().List(ctx, reader, selector)
	if err != nil {
		return err
	}
	_, err = r.writer().Delete(ctx, ownership(rule), objs, keep)
	return err
}

// finalize lets a deleted APIRule go once its objects are gone.
func (r *Reconciler) finalize(ctx context.Context, rule *porticov1alpha1.APIRule) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(rule, Finalizer) {
		return ctrl.Result{}, nil // it wrote nothing (or owner references remove it)
	}
	return r.release(ctx, rule)
}

// release deletes every object of the APIRule, read past the cache (in
// every namespace: objects created moments ago may not be cached yet), and
// takes the finalizer off once none is left. Until then the APIRule's
// hosts stay claimed; an object of its own that another's finalizer holds
// is looked at again after releaseRetry. Objects that only carry the
// APIRule's labels (anywhere: another namespace's tenant can write them)
// are never deleted or waited for, only reported: a tenant cannot hold
// another's APIRule, and so its hosts, in deletion.
func (r *Reconciler) release(ctx context.Context, rule *porticov1alpha1.APIRule) (ctrl.Result, error) {
	selector := client.MatchingLabels{plan.LabelManagedBy: plan.ManagedBy,
		plan.LabelAPIRule: rule.Name, plan.LabelAPIRuleNamespace: rule.Namespace}
	objs, err := r.listed().List(ctx, r.Reader, selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.reportLookAlikes(rule, objs)
	if _, err := r.writer().Delete(ctx, ownership(rule), objs, nil); err != nil {
		return ctrl.Result{}, err
	}
	remaining := ownedAmong(rule, objs)
	if remaining > 0 {
		// Deleted just now, or being deleted: gone, unless another's
		// finalizer holds one.
		if objs, err = r.listed().List(ctx, r.Reader, selector); err != nil {
			return ctrl.Result{}, err
		}
		remaining = ownedAmong(rule, objs)
	}
	if remaining > 0 {
		ctrl.LoggerFrom(ctx).Info("Waiting for the APIRule's objects to be deleted before letting its hosts go", "remaining", remaining)
		return ctrl.Result{RequeueAfter: releaseRetry}, nil
	}
	return ctrl.Result{}, r.setFinalizer(ctx, rule, false)
}

// ownedAmong counts the objects of rule among objs.
func ownedAmong(rule *porticov1alpha1.APIRule, objs []client.Object) int {
	n := 0
	for _, o := range objs {
		if owns(rule, o) {
			n++
		}
	}
	return n
}

// reportLookAlikes records an Event on the APIRule for the objects among
// objs that carry its labels but that the controller did not write for it.
// The Event counts them and names none: they may be in namespaces the
// APIRule's owner must not learn of.
func (r *Reconciler) reportLookAlikes(rule *porticov1alpha1.APIRule, objs []client.Object) {
	n := 0
	for _, o := range objs {
		if labelledFor(rule, o) && !owns(rule, o) {
			n++
		}
	}
	if n == 0 || r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, porticov1alpha1.EventLookAlikeIgnored, "Release",
		"%d object(s) carry this APIRule's labels but were not written by Portico for it: they were left alone and are not waited for", n)
}

func (r *Reconciler) setFinalizer(ctx context.Context, rule *porticov1alpha1.APIRule, present bool) error {
	if controllerutil.ContainsFinalizer(rule, Finalizer) == present {
		return nil
	}
	updated := rule.DeepCopy()
	if present {
		controllerutil.AddFinalizer(updated, Finalizer)
	} else {
		controllerutil.RemoveFinalizer(updated, Finalizer)
	}
	r.written.begin(updated)
	err := r.writeClient().Patch(ctx, updated, client.MergeFromWithOptions(rule, client.MergeFromWithOptimisticLock{}))
	r.written.end(updated, err == nil)
	if err != nil {
		if apierrors.IsNotFound(err) && !present {
			return nil
		}
		return fmt.Errorf("update the finalizers of the APIRule: %w", err)
	}
	rule.Finalizers, rule.ResourceVersion = updated.Finalizers, updated.ResourceVersion
	return nil
}

// appliedMessage names what the APIRule is made of, by kind:
// "AuthorizationPolicy shop/orders, VirtualService shop/orders applied".
func appliedMessage(desired []client.Object) string {
	byKind := map[string][]string{}
	var order []string
	for _, d := range desired {
		kind := kindOf(d)
		if _, ok := byKind[kind]; !ok {
			order = append(order, kind)
		}
		byKind[kind] = append(byKind[kind], d.GetNamespace()+"/"+d.GetName())
	}
	parts := make([]string, 0, len(order))
	for _, kind := range order {
		parts = append(parts, kind+" "+strings.Join(byKind[kind], ", "))
	}
	return strings.Join(parts, "; ") + " applied"
}

// setReady sets the Ready condition; its message is bounded, as a long
// list of objects or errors would otherwise make the status write fail.
func setReady(rule *porticov1alpha1.APIRule, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&rule.Status.Conditions, metav1.Condition{
		Type: porticov1alpha1.ConditionReady, Status: status, Reason: reason, Message: contract.Truncate(msg, contract.MessageMaxLength),
		ObservedGeneration: rule.Generation,
	})
	rule.Status.ObservedGeneration = rule.Generation
}

func (r *Reconciler) writeStatus(ctx context.Context, before, after *porticov1alpha1.APIRule) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	// With the resourceVersion the reconcile read (or its own finalizer
	// patch returned): a status computed from a copy the cache still showed
	// is never written onto a newer APIRule (above all not onto one deleted
	// and re-created with the same name, whose objects it does not
	// describe). The patch carries the base's resourceVersion.
	base, patched := statusOnly(before, after.ResourceVersion), statusOnly(after, after.ResourceVersion)
	r.written.begin(patched)
	err := r.writeClient().Status().Patch(ctx, patched, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	r.written.end(patched, err == nil)
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("write APIRule status: %w", err))
	}
	after.ResourceVersion = patched.ResourceVersion
	r.statusWritten(before, after)
	return nil
}

// statusOnly is what a status patch compares of an APIRule: its identity
// at resourceVersion, and its status (sharing rule's). The status
// subresource takes nothing else from a patch, and the spec, the bulk of an
// APIRule, would otherwise be encoded twice and compared for every status
// write (issue 45).
func statusOnly(rule *porticov1alpha1.APIRule, resourceVersion string) *porticov1alpha1.APIRule {
	return &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: rule.Name, Namespace: rule.Namespace, UID: rule.UID, ResourceVersion: resourceVersion},
		Status:     rule.Status,
	}
}

// retireWriters is how many finalizers Retire removes at once.
const retireWriters = 32

// Retire takes the controller's finalizer off every APIRule. It runs when
// the controller is disabled or Portico removed: with nobody left to delete
// their objects, APIRules could otherwise not be deleted. Their Istio
// objects stay in force (the controller never removes a user's routes on
// its way out); those in the APIRule's namespace go with it through their
// owner references. Re-enabled, the controller puts the finalizer back on
// its next reconcile of each. What it cannot do in time (the process has a
// few seconds to stop) it reports in one error, with the way to finish.
func Retire(ctx context.Context, c client.Client) error {
	var rules porticov1alpha1.APIRuleList
	if err := c.List(ctx, &rules); err != nil {
		return fmt.Errorf("list APIRules: %w", err)
	}
	var held []*porticov1alpha1.APIRule
	for i := range rules.Items {
		if controllerutil.ContainsFinalizer(&rules.Items[i], Finalizer) {
			held = append(held, &rules.Items[i])
		}
	}
	var (
		mu       sync.Mutex
		failed   int
		firstErr error
	)
	workqueue.ParallelizeUntil(ctx, retireWriters, len(held), func(i int) {
		rule := held[i]
		updated := rule.DeepCopy()
		controllerutil.RemoveFinalizer(updated, Finalizer)
		err := c.Patch(ctx, updated, client.MergeFromWithOptions(rule, client.MergeFromWithOptimisticLock{}))
		if client.IgnoreNotFound(err) != nil {
			mu.Lock()
			defer mu.Unlock()
			failed++
			if firstErr == nil {
				firstErr = fmt.Errorf("APIRule %s/%s: %w", rule.Namespace, rule.Name, err)
			}
		}
	})
	if failed > 0 {
		return fmt.Errorf("%d of %d APIRules keep the finalizer %s (first error: %w); remove it by hand (kubectl patch) if you delete them while the controller is not running",
			failed, len(held), Finalizer, firstErr)
	}
	return nil
}

// written is every kind the controller writes for APIRules, in the order
// they are listed: the one place that names them.
var written = owned.Table{kinds.VirtualServices, kinds.AuthorizationPolicies, kinds.RequestAuthentications, kinds.HTTPRoutes}

// istioKinds are the kinds of written that are Istio's.
var istioKinds = written[:3]

// listed is the kinds the controller looks for its objects in: HTTPRoutes
// only while the Gateway API is installed.
func (r *Reconciler) listed() owned.Table {
	if r.Installed.HTTPRoutes {
		return written
	}
	return istioKinds
}

// writer is the write path of the APIRules' objects: create-first, updates
// at the resourceVersion whose ownership was checked, deletions with UID
// preconditions and tombstones, every write counted and seen by the
// controller's own-write filter.
func (r *Reconciler) writer() *owned.Writer {
	r.objectsOnce.Do(func() {
		r.objects = &owned.Writer{
			Client: r.writeClient(), Reader: r.Reader, Kinds: written, FieldOwner: FieldManager, Observer: &r.written,
			Written: func(_ client.Object, kind, operation string) { metrics.Written(controllerName, kind, operation) },
		}
	})
	return r.objects
}

// writeClient is the client of the controller's writes: writes, else
// Client.
func (r *Reconciler) writeClient() client.Client {
	if r.writes != nil {
		return r.writes
	}
	return r.Client
}

func kindOf(obj client.Object) string { return written.Name(obj) }

// objectID identifies an object among the APIRule's of every kind.
func objectID(obj client.Object) string { return written.ID(obj) }

func upToDate(desired, live client.Object) bool {
	return owned.UpToDate(written.Of(desired), desired, live)
}
