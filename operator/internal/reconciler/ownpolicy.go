package reconciler

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/backoff"
	"github.com/portico-dev/portico/internal/owned"
	"github.com/portico-dev/portico/operator/internal/render"
)

// ReasonNetworkPolicyNotOwned is the reason of the Warning Event the
// operator records on its own Deployment when a NetworkPolicy holds the
// name of its own policy and the operator did not write it.
const ReasonNetworkPolicyNotOwned = "NetworkPolicyNotOwned"

// ownPolicyKind is the operator's own NetworkPolicy, written through the
// create-first, resourceVersion-checked path of package owned.
var ownPolicyKind = owned.Struct("NetworkPolicy",
	func(o *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicySpec { return &o.Spec },
	func(dst, src *networkingv1.NetworkPolicy) { dst.Spec = *src.Spec.DeepCopy() },
	func(l *networkingv1.NetworkPolicyList) []*networkingv1.NetworkPolicy {
		out := make([]*networkingv1.NetworkPolicy, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	})

// OwnNetworkPolicy keeps the operator's own NetworkPolicy
// (--own-network-policy): the policy the chart renders for the operator's
// pods (render.OperatorNetworkPolicy), for installs that cannot carry one,
// such as OLM v1's, whose bundles admit no NetworkPolicy. It writes the
// policy when it is missing, takes back every change to it and writes it
// again after a deletion.
//
// The policy is the operator's only while it has the operator's
// Deployment, by UID, as its controlling owner: a NetworkPolicy of that
// name that anyone else wrote (labels prove nothing) is never updated,
// deleted or adopted. The operator records a Warning Event
// ReasonNetworkPolicyNotOwned on its Deployment once per such object, logs
// it on every reconcile, and writes its own policy as soon as the other is
// gone.
type OwnNetworkPolicy struct {
	// Client writes the policy. APIReader reads past every cache, when a
	// create meets a policy the cache did not show.
	Client    client.Client
	APIReader client.Reader
	// Reader reads the operator's Deployment and the policy of its name;
	// SetupWithManager sets it to a cache of those two objects.
	Reader client.Reader
	// Namespace and Deployment name the operator's Deployment; its policy
	// has the same name.
	Namespace, Deployment string
	// Policy is what the policy allows.
	Policy render.OperatorPolicy
	// Recorder records the refusal; nil records nothing.
	Recorder events.EventRecorder

	writer *owned.Writer
	// reported is the UID of the foreign policy last reported, so that
	// each gets one Event.
	reported types.UID
}

// SetupWithManager registers the reconciler with a cache of its own that
// holds exactly two objects, the operator's Deployment and any
// NetworkPolicy of its name, whoever wrote it: the manager's cache holds
// only the objects the operator manages for the APIGateway, by label,
// and would not show a policy a tenant created under that name, nor its
// deletion.
func (r *OwnNetworkPolicy) SetupWithManager(mgr ctrl.Manager) error {
	named := fields.OneTermEqualSelector("metadata.name", r.Deployment)
	own, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.Cache = cache.Options{
			DefaultNamespaces: map[string]cache.Config{r.Namespace: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
			NewInformer:       backoff.NewInformer,
			ByObject: map[client.Object]cache.ByObject{
				&networkingv1.NetworkPolicy{}: {Field: named},
				&appsv1.Deployment{}:          {Field: named},
			},
		}
	})
	if err != nil {
		return fmt.Errorf("create the cache of the operator's own NetworkPolicy: %w", err)
	}
	if err := mgr.Add(own); err != nil {
		return err
	}
	if r.Reader == nil {
		r.Reader = own.GetCache()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	request := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Deployment}}
	enqueue := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{request}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("own-networkpolicy").
		WatchesRawSource(source.Kind[client.Object](own.GetCache(), &appsv1.Deployment{}, enqueue)).
		WatchesRawSource(source.Kind[client.Object](own.GetCache(), &networkingv1.NetworkPolicy{}, enqueue)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, RateLimiter: backoff.Limiter[reconcile.Request]()}).
		Complete(r)
}

// Reconcile writes or repairs the policy, unless another's object holds
// its name.
func (r *OwnNetworkPolicy) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: r.Namespace, Name: r.Deployment}
	log := ctrl.LoggerFrom(ctx).WithValues("networkpolicy", klog.KRef(r.Namespace, r.Deployment))
	ctx = ctrl.LoggerInto(ctx, log)
	deployment := &appsv1.Deployment{}
	if err := r.Reader.Get(ctx, key, deployment); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Not writing the operator's NetworkPolicy: the operator's Deployment does not exist", "deployment", klog.KRef(r.Namespace, r.Deployment))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("read the operator's Deployment %s: %w", key, err)
	}
	if !deployment.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the policy goes with it (owner reference)
	}
	owns := owned.ControlledBy(deployment, r.Namespace)

	var live *networkingv1.NetworkPolicy
	policy := &networkingv1.NetworkPolicy{}
	switch err := r.Reader.Get(ctx, key, policy); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("read NetworkPolicy %s: %w", key, err)
	case !owns(policy):
		r.refuse(ctx, deployment, policy.UID, fmt.Sprintf("NetworkPolicy %s exists", key))
		return ctrl.Result{}, nil
	case !policy.DeletionTimestamp.IsZero():
		return ctrl.Result{}, nil // written again once it is gone
	default:
		live = policy
	}

	desired := render.OperatorNetworkPolicy(deployment, r.Policy)
	var current client.Object
	if live != nil {
		current = live
	}
	_, conflict, err := r.policyWriter().Write(ctx, owns, desired, current)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conflict != "" {
		// The cache had not shown it yet; the watch brings it, and the
		// Event with it.
		r.refuse(ctx, deployment, "", conflict)
		return ctrl.Result{}, nil
	}
	r.reported = ""
	return ctrl.Result{}, nil
}

// policyWriter is the create-first, resourceVersion-checked write path of
// package owned, as the operator's field manager.
func (r *OwnNetworkPolicy) policyWriter() *owned.Writer {
	if r.writer == nil {
		r.writer = &owned.Writer{
			Client: r.Client, Reader: r.APIReader, Kinds: owned.Table{ownPolicyKind},
			FieldOwner: operatorv1alpha1.FieldManager,
			Written: func(obj client.Object, kind, operation string) {
				ctrl.Log.WithName("own-networkpolicy").Info("Wrote the operator's NetworkPolicy", "networkpolicy", klog.KObj(obj), "operation", operation)
			},
		}
	}
	return r.writer
}

// refuse leaves a NetworkPolicy the operator did not write alone and says
// so: a log line every time, an Event once per object (uid; none for an
// object the cache does not show yet).
func (r *OwnNetworkPolicy) refuse(ctx context.Context, deployment *appsv1.Deployment, uid types.UID, what string) {
	message := fmt.Sprintf("%s and the operator did not create it (it is not controlled by Deployment %s/%s, UID %s): "+
		"the operator leaves it as it is and does not write its own NetworkPolicy; delete it to let the operator write its own",
		what, deployment.Namespace, deployment.Name, deployment.UID)
	ctrl.LoggerFrom(ctx).Error(nil, "Refusing to take over a NetworkPolicy", "reason", ReasonNetworkPolicyNotOwned, "message", message)
	if r.Recorder == nil || uid == "" || uid == r.reported {
		return
	}
	r.reported = uid
	r.Recorder.Eventf(deployment, nil, corev1.EventTypeWarning, ReasonNetworkPolicyNotOwned, "WriteNetworkPolicy", "%s", message)
}
