package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/owned"
	"github.com/portico-dev/portico/operator/internal/catalog"
	"github.com/portico-dev/portico/operator/internal/gating"
	"github.com/portico-dev/portico/operator/internal/readiness"
	"github.com/portico-dev/portico/operator/internal/render"
	"github.com/portico-dev/portico/operator/internal/status"
)

// Reconciler runs the catalog's controllers for the APIGateway "default".
type Reconciler struct {
	// Client reads from the manager's caches and writes to the API server.
	Client client.Client
	// Catalog is the set of controllers; it must be valid.
	Catalog catalog.Catalog
	// Namespace holds the operator and every controller Deployment.
	Namespace string
	// Images are the default image settings.
	Images render.ImageDefaults
	// Recorder emits Events on phase transitions; nil disables Events.
	Recorder events.EventRecorder
	// Clock stamps transition times.
	Clock clock.PassiveClock
	// Metrics receives the phase and precondition series.
	Metrics *Metrics
	// APIServerClusterIP is Service default/kubernetes's ClusterIP, which the
	// controllers' NetworkPolicies allow besides its endpoints (network
	// plugins that match before translating it); the zero Addr leaves it out.
	APIServerClusterIP netip.Addr

	// lastWrite remembers the status this reconciler last wrote; until the
	// cache catches up with the write, the next reconcile compares with what
	// was written, so it neither writes the same status again nor repeats a
	// transition Event (see cachedStatus).
	lastWrite lastWrite
	// objects writes and removes the controllers' Deployments and their
	// companions (see writer); it remembers the last apply of each.
	objects    *owned.Writer
	writerOnce sync.Once
}

// Request is the single key every event maps to.
var Request = ctrl.Request{NamespacedName: client.ObjectKey{Name: operatorv1alpha1.SingletonName}}

// Reconcile converges every controller of the catalog to the APIGateway's
// spec and the cluster's CRDs, then reports the outcome in status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)
	gw := &operatorv1alpha1.APIGateway{}
	if err := r.Client.Get(ctx, req.NamespacedName, gw); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("read APIGateway %s: %w", req.Name, err)
		}
		gw = nil
	}
	if gw != nil {
		log = log.WithValues("apigateway", klog.KObj(gw))
		ctx = ctrl.LoggerInto(ctx, log)
		if r.lastWrite.isAhead(gw.ResourceVersion) {
			gw.Status = *r.lastWrite.status.DeepCopy() // the cache has not seen our write yet
		}
	}

	var spec *operatorv1alpha1.APIGatewaySpec
	if gw != nil && gw.DeletionTimestamp.IsZero() {
		spec = &gw.Spec
	}
	snap, err := r.readSnapshot(ctx, spec)
	if err != nil {
		return ctrl.Result{}, err
	}

	if gw == nil || !gw.DeletionTimestamp.IsZero() {
		// Owner references let the garbage collector remove the Deployments;
		// deleting them here as well makes removal prompt and independent of
		// the GC (and of clusters without kube-controller-manager).
		retErr = r.deleteAll(ctx, snap)
		r.Metrics.setGlobalRateLimitMode(false, true)
		if gw != nil {
			retErr = errors.Join(retErr, r.writeStatus(ctx, gw, r.deletingStatus(gw)))
		}
		return ctrl.Result{}, retErr
	}

	snap.globalRateLimits = r.globalRateLimits(gw, snap)
	r.Metrics.setGlobalRateLimitMode(snap.globalRateLimits.run, gw.Spec.GlobalRateLimits().FailsOpen())
	results := make([]status.Controller, 0, len(r.Catalog))
	phases := map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{}
	var errs []error
	for _, entry := range r.Catalog {
		res, err := r.reconcileController(ctx, gw, entry, snap, phases)
		if err != nil {
			errs = append(errs, err) // one controller's failure never stops the others
		}
		phases[entry.Name] = res.Phase
		results = append(results, res)
	}
	errs = append(errs, r.deleteUnknown(ctx, snap))

	newStatus := status.Compute(status.Input{
		Generation:  gw.Generation,
		Controllers: results,
		Previous:    gw.Status,
		Now:         metav1.NewTime(r.Clock.Now()),
	})
	// status.gateway is the gateway controller's to write.
	newStatus.Gateway = gw.Status.Gateway
	r.recordTransitions(gw, newStatus)
	errs = append(errs, r.writeStatus(ctx, gw, newStatus))
	return ctrl.Result{}, errors.Join(errs...)
}

func (r *Reconciler) reconcileController(ctx context.Context, gw *operatorv1alpha1.APIGateway, entry catalog.Entry, snap *snapshot,
	phases map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase) (status.Controller, error) {
	spec := gw.Spec.Controller(entry.Name)
	enabled := spec.IsEnabled()
	res := status.Controller{Enabled: enabled, ControllerStatus: operatorv1alpha1.ControllerStatus{Name: entry.Name}}
	live := snap.deployments[entry.Binary()]

	gate := r.gate(gw, entry, enabled, snap, phases)
	r.recordPreconditions(entry, &gw.Spec, snap, gate)
	if !gate.Run {
		res.Phase, res.Reason, res.Message, res.MissingCRDs = gate.Phase, gate.Reason, gate.Message, gate.MissingCRDs
		// A component the spec does not configure is not wanted, as a
		// disabled controller is not: it counts neither as enabled nor as
		// a warning.
		res.Enabled = enabled && gate.Phase != operatorv1alpha1.PhaseDisabled
		err := errors.Join(deleteManaged(ctx, r, &deploymentKind, entry.Name, live),
			deleteManaged(ctx, r, &disruptionBudgetKind, entry.Name, snap.budgets[entry.Binary()]),
			deleteManaged(ctx, r, &networkPolicyKind, entry.Name, snap.policies[entry.Binary()]),
			r.deleteServices(ctx, entry, snap))
		if err != nil {
			setDegraded(&res, err)
			return res, err
		}
		return res, nil
	}
	if message, refused := render.Refusal(entry, spec); refused {
		// Nothing is written: the Deployment and its budget keep running
		// as they were until the spec is fixed.
		res.Phase, res.Reason, res.Message = operatorv1alpha1.PhaseDegraded, operatorv1alpha1.ReasonInvalidSpec, message
		if live != nil {
			res.Image, res.Replicas = live.Spec.Template.Spec.Containers[0].Image, ptr.Deref(live.Spec.Replicas, 1)
			res.ReadyReplicas, res.UpdatedReplicas = live.Status.ReadyReplicas, live.Status.UpdatedReplicas
		}
		return res, nil
	}

	image := render.Image(entry, spec, r.Images)
	res.Image = image
	res.Replicas = render.Replicas(spec)
	companions := render.Input{Entry: entry, Spec: spec, Namespace: r.Namespace, Owner: render.Owner{Name: gw.Name, UID: gw.UID}}
	if snap.globalRateLimits.run && (entry.NeedsGlobalRateLimits || entry.Name == operatorv1alpha1.ControllerRateLimit) {
		companions.Global, companions.RedisPort = gw.Spec.GlobalRateLimits(), snap.globalRateLimits.redisPort
	}
	rendering := companions
	rendering.Image = image
	desired := render.Deployment(rendering)
	if live != nil && !live.DeletionTimestamp.IsZero() {
		res.Phase, res.Reason = operatorv1alpha1.PhaseProgressing, operatorv1alpha1.ReasonRolloutInProgress
		res.Message = fmt.Sprintf("waiting for the old deployment %s to be deleted before recreating it", live.Name)
		return res, nil
	}
	current, err := r.applyDeployment(ctx, entry.Name, desired, live)
	if err != nil {
		setDegraded(&res, err)
		return res, err
	}
	if err := errors.Join(
		reconcileManaged(ctx, r, &disruptionBudgetKind, entry.Name, render.DisruptionBudget(companions), snap.budgets[entry.Binary()], snap),
		r.reconcileNetworkPolicy(ctx, &gw.Spec, companions, snap),
		r.reconcileService(ctx, companions, snap),
	); err != nil {
		setDegraded(&res, err)
		return res, err
	}
	if live == nil || current.Generation != live.Generation {
		// The server changed the spec: a rollout starts. An apply it found
		// nothing to change in, or that only took back metadata, keeps the
		// generation and the rollout's state.
		res.Phase, res.Reason = operatorv1alpha1.PhaseProgressing, operatorv1alpha1.ReasonRolloutInProgress
		res.Message = fmt.Sprintf("deployment %s applied; waiting for the rollout", entry.Binary())
		res.ReadyReplicas, res.UpdatedReplicas = current.Status.ReadyReplicas, current.Status.UpdatedReplicas
		res.ImageID = imageID(current, entry, snap)
		return res, nil
	}
	ready := readiness.Evaluate(current, snap.pods[entry.Name])
	res.Phase, res.Reason, res.Message = ready.Phase, ready.Reason, ready.Message
	res.Replicas, res.ReadyReplicas, res.UpdatedReplicas = ready.Replicas, ready.ReadyReplicas, ready.UpdatedReplicas
	res.ImageID = imageID(current, entry, snap)
	return res, nil
}

// reconcileNetworkPolicy applies the controller's NetworkPolicy, or deletes
// it when policies are off. While no endpoint of the API server is known a
// policy cannot be rendered without cutting the controller off: the one it
// has (if any) stays as it is, and none is created.
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, spec *operatorv1alpha1.APIGatewaySpec, in render.Input, snap *snapshot) error {
	live := snap.policies[in.Entry.Binary()]
	if !spec.NetworkPoliciesEnabled() {
		return deleteManaged(ctx, r, &networkPolicyKind, in.Entry.Name, live)
	}
	desired := render.NetworkPolicy(in, snap.apiServer, spec.MetricsFromNamespaces())
	if desired == nil {
		ctrl.LoggerFrom(ctx).Info("Not writing the controller's NetworkPolicy: no endpoint of Service default/kubernetes is known",
			"controller", in.Entry.Name, "kept", live != nil)
		return nil
	}
	return reconcileManaged(ctx, r, &networkPolicyKind, in.Entry.Name, desired, live, snap)
}

// gate decides whether the entry may run this round.
func (r *Reconciler) gate(gw *operatorv1alpha1.APIGateway, entry catalog.Entry, enabled bool, snap *snapshot,
	phases map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase) gating.Result {
	return gating.Evaluate(gating.Input{Entry: entry, Enabled: enabled, Spec: &gw.Spec, Cluster: gating.Cluster{
		CRDs: snap.crds, Phases: phases, Namespace: r.Namespace, Secrets: snap.secrets,
	}})
}

// globalRateLimitsRound is whether the rate-limit service runs this round,
// which the ratelimit controller's flags follow, and the Redis port its
// NetworkPolicy allows.
type globalRateLimitsRound struct {
	run       bool
	redisPort int32
}

// globalRateLimits gates the catalog's rate-limit service ahead of the
// round (it depends on no other controller), so the ratelimit controller,
// which comes before it, is rendered with the global flags exactly while
// the service runs.
func (r *Reconciler) globalRateLimits(gw *operatorv1alpha1.APIGateway, snap *snapshot) globalRateLimitsRound {
	global := gw.Spec.GlobalRateLimits()
	if global == nil {
		return globalRateLimitsRound{}
	}
	for _, entry := range r.Catalog {
		if !entry.NeedsGlobalRateLimits {
			continue
		}
		if !r.gate(gw, entry, gw.Spec.Controller(entry.Name).IsEnabled(), snap, nil).Run {
			return globalRateLimitsRound{}
		}
		port, _ := gating.RedisPort(snap.secrets[global.Redis.SecretName].Address) // gating checked it
		return globalRateLimitsRound{run: true, redisPort: port}
	}
	return globalRateLimitsRound{}
}

// reconcileService applies the component's Service (the rate-limit
// service's), or deletes the one it has when it must have none.
func (r *Reconciler) reconcileService(ctx context.Context, in render.Input, snap *snapshot) error {
	desired := render.Service(in)
	var errs []error
	for name, live := range snap.services {
		if controllerOf(live) == in.Entry.Name && (desired == nil || name != *desired.Name) {
			errs = append(errs, deleteManaged(ctx, r, &serviceKind, in.Entry.Name, live))
		}
	}
	if desired != nil {
		errs = append(errs, reconcileManaged(ctx, r, &serviceKind, in.Entry.Name, desired, snap.services[*desired.Name], snap))
	}
	return errors.Join(errs...)
}

// deleteServices removes every managed Service of the entry.
func (r *Reconciler) deleteServices(ctx context.Context, entry catalog.Entry, snap *snapshot) error {
	var errs []error
	for _, live := range snap.services {
		if controllerOf(live) == entry.Name {
			errs = append(errs, deleteManaged(ctx, r, &serviceKind, entry.Name, live))
		}
	}
	return errors.Join(errs...)
}

// imageID is the digest the ready pods of the Deployment's current template
// run in the controller container.
func imageID(d *appsv1.Deployment, entry catalog.Entry, snap *snapshot) string {
	return readiness.ImageID(d, snap.replicaSets[entry.Name], snap.pods[entry.Name], contract.ContainerName)
}

func setDegraded(res *status.Controller, err error) {
	res.Phase = operatorv1alpha1.PhaseDegraded
	res.Reason = operatorv1alpha1.ReasonDeploymentApplyFailed
	res.Message = err.Error()
}

// deleteUnknown removes managed Deployments and budgets that no catalog
// entry claims, for example after a controller was dropped from the
// catalog.
func (r *Reconciler) deleteUnknown(ctx context.Context, snap *snapshot) error {
	known := func(name string) bool {
		return slices.ContainsFunc(r.Catalog, func(e catalog.Entry) bool { return e.Binary() == name })
	}
	var errs []error
	errs = append(errs, deleteEach(ctx, r, &deploymentKind, snap.deployments, known)...)
	errs = append(errs, deleteEach(ctx, r, &disruptionBudgetKind, snap.budgets, known)...)
	errs = append(errs, deleteEach(ctx, r, &networkPolicyKind, snap.policies, known)...)
	knownController := func(name string) bool {
		return slices.ContainsFunc(r.Catalog, func(e catalog.Entry) bool { return e.Name == controllerOf(snap.services[name]) })
	}
	errs = append(errs, deleteEach(ctx, r, &serviceKind, snap.services, knownController)...)
	return errors.Join(errs...)
}

func (r *Reconciler) deleteAll(ctx context.Context, snap *snapshot) error {
	none := func(string) bool { return false }
	var errs []error
	errs = append(errs, deleteEach(ctx, r, &deploymentKind, snap.deployments, none)...)
	errs = append(errs, deleteEach(ctx, r, &disruptionBudgetKind, snap.budgets, none)...)
	errs = append(errs, deleteEach(ctx, r, &networkPolicyKind, snap.policies, none)...)
	errs = append(errs, deleteEach(ctx, r, &serviceKind, snap.services, none)...)
	return errors.Join(errs...)
}

// deleteEach deletes every object of the map whose name keep rejects.
func deleteEach[T client.Object](ctx context.Context, r *Reconciler, kind *owned.Kind, objects map[string]T, keep func(string) bool) []error {
	var errs []error
	for name, o := range objects {
		if !keep(name) {
			errs = append(errs, deleteManaged(ctx, r, kind, controllerOf(o), o))
		}
	}
	return errs
}

// controllerOf is the catalog controller a managed object's label names.
func controllerOf(o client.Object) operatorv1alpha1.ControllerName {
	return operatorv1alpha1.ControllerName(o.GetLabels()[operatorv1alpha1.LabelController])
}

func (r *Reconciler) deletingStatus(gw *operatorv1alpha1.APIGateway) operatorv1alpha1.APIGatewayStatus {
	var controllers []status.Controller
	for _, c := range gw.Status.Controllers {
		controllers = append(controllers, status.Controller{ControllerStatus: c, Enabled: c.Phase != operatorv1alpha1.PhaseDisabled})
	}
	st := status.Compute(status.Input{
		Generation: gw.Generation, Deleting: true, Controllers: controllers,
		Previous: gw.Status, Now: metav1.NewTime(r.Clock.Now()),
	})
	st.Gateway = gw.Status.Gateway // the gateway controller's to write
	return st
}

// writeStatus sends the status only when it differs from what is stored.
func (r *Reconciler) writeStatus(ctx context.Context, gw *operatorv1alpha1.APIGateway, newStatus operatorv1alpha1.APIGatewayStatus) error {
	if equality.Semantic.DeepEqual(gw.Status, newStatus) {
		return nil
	}
	patched := gw.DeepCopy()
	patched.Status = newStatus
	r.Metrics.Writes.WithLabelValues("status").Inc()
	if err := r.Client.Status().Patch(ctx, patched, client.MergeFrom(gw)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		r.Metrics.Errors.WithLabelValues("", "status").Inc()
		return fmt.Errorf("write APIGateway status: %w", err)
	}
	r.lastWrite = lastWrite{overRV: gw.ResourceVersion, rv: patched.ResourceVersion, status: *newStatus.DeepCopy()}
	return nil
}

// lastWrite is the status a reconciler last wrote, the resourceVersion it
// was written over and the one the write produced.
type lastWrite struct {
	overRV, rv string
	status     operatorv1alpha1.APIGatewayStatus
}

// isAhead reports whether the write is newer than the cached APIGateway of
// resourceVersion cached (owned.Behind). The cache may be behind by more
// than one write of ours: were only the version written over recognised,
// the status of an earlier write would be compared with again and its
// transitions repeated as Events.
func (w lastWrite) isAhead(cached string) bool {
	return owned.Behind(cached, w.overRV, w.rv)
}

func (r *Reconciler) recordPreconditions(entry catalog.Entry, spec *operatorv1alpha1.APIGatewaySpec, snap *snapshot, gate gating.Result) {
	for _, crd := range entry.CRDsFor(spec) {
		state, ok := snap.crds[crd.Name]
		available := ok && state.Established && !state.Terminating && slices.Contains(state.ServedVersions, crd.Version)
		r.Metrics.CRDAvailable.WithLabelValues(string(entry.Name), crd.String()).Set(boolGauge(available))
	}
	r.Metrics.PreconditionsMet.WithLabelValues(string(entry.Name)).Set(boolGauge(gate.Run))
}

// recordTransitions emits one Event per controller whose phase changed and
// updates the phase series.
func (r *Reconciler) recordTransitions(gw *operatorv1alpha1.APIGateway, newStatus operatorv1alpha1.APIGatewayStatus) {
	previous := map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{}
	for _, c := range gw.Status.Controllers {
		previous[c.Name] = c.Phase
	}
	for _, c := range newStatus.Controllers {
		r.Metrics.setPhase(c.Name, c.Phase)
		r.Metrics.ReadyReplicas.WithLabelValues(string(c.Name)).Set(float64(c.ReadyReplicas))
		if r.Recorder == nil || previous[c.Name] == c.Phase {
			continue
		}
		eventType := corev1.EventTypeNormal
		if c.Phase == operatorv1alpha1.PhaseDegraded || c.Phase == operatorv1alpha1.PhaseBlocked {
			eventType = corev1.EventTypeWarning
		}
		note := contract.Truncate(fmt.Sprintf("%s is %s: %s", c.Name, c.Phase, c.Message), contract.EventNoteMaxLength)
		r.Recorder.Eventf(gw, nil, eventType, c.Reason, "Controller"+string(c.Phase), "%s", note)
	}
}
