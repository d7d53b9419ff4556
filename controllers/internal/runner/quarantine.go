package runner

import (
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/portico-dev/portico/controllers/internal/quarantine"
	"github.com/portico-dev/portico/internal/contract"
)

// Every object a controller sets aside gets an Event in its own namespace.
//
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// quarantineEvents records an Event on each object the quarantine guard
// sets aside, once a recorder is given: the guard must exist before the
// manager that provides the recorder.
type quarantineEvents struct {
	recorder atomic.Pointer[events.EventRecorder]
}

// use starts recording with r.
func (q *quarantineEvents) use(r events.EventRecorder) { q.recorder.Store(&r) }

// record is the guard's OnQuarantine hook; recording is asynchronous.
func (q *quarantineEvents) record(r quarantine.Report) {
	rec := q.recorder.Load()
	if rec == nil {
		return
	}
	regarding := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: r.GVK.GroupVersion().String(), Kind: r.GVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Namespace, Name: r.Name, UID: r.UID, ResourceVersion: r.ResourceVersion,
		},
	}
	note := contract.Truncate(r.Message(), contract.EventNoteMaxLength)
	(*rec).Eventf(regarding, nil, corev1.EventTypeWarning, "UndecodableObject", string(r.Reason), "%s", note)
}

// guardConfig returns a copy of cfg whose every client (caches, API reader,
// direct clients) goes through a quarantine guard for the kinds of scheme,
// which records Events through q.
func guardConfig(cfg *rest.Config, scheme *runtime.Scheme, q *quarantineEvents, slim func(runtime.Object) runtime.Object, handoff *quarantine.Handoff, log logr.Logger) *rest.Config {
	guarded := rest.CopyConfig(cfg)
	guarded.Wrap(quarantine.New(scheme, quarantine.Options{
		Log: log, OnQuarantine: q.record, Slim: slim, Handoff: handoff,
		// Every cache of the runner strips them (cache.TransformStripManagedFields
		// or a transform of its own), and nothing else here watches.
		WithoutManagedFields: true,
	}).Wrap)
	return guarded
}

// newHandoff returns the guard's Handoff of the kinds of objs, nil for
// none.
func newHandoff(scheme *runtime.Scheme, objs []client.Object) (*quarantine.Handoff, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	var gvks []schema.GroupVersionKind
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, fmt.Errorf("hand off %T: %w", obj, err)
		}
		gvks = append(gvks, gvk)
	}
	return quarantine.NewHandoff(gvks...), nil
}

// handOffTo makes every transform of a cache take the objects handoff
// holds for the placeholders it passes on (quarantine.Handoff.Transform),
// before it does its own work: the default one and each kind's. A cache
// built on the guarded config must go through it, whatever it watches.
func handOffTo(opts *cache.Options, handoff *quarantine.Handoff) {
	if handoff == nil {
		return
	}
	for obj, by := range opts.ByObject {
		if by.Transform != nil {
			by.Transform = handoff.Transform(by.Transform)
			opts.ByObject[obj] = by
		}
	}
	// Kinds without a transform of their own get the default one.
	opts.DefaultTransform = handoff.Transform(opts.DefaultTransform)
}
