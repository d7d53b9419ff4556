package runner

import (
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

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
func guardConfig(cfg *rest.Config, scheme *runtime.Scheme, q *quarantineEvents, slim func(runtime.Object) runtime.Object, log logr.Logger) *rest.Config {
	guarded := rest.CopyConfig(cfg)
	guarded.Wrap(quarantine.New(scheme, quarantine.Options{
		Log: log, OnQuarantine: q.record, Slim: slim,
		// Every cache of the runner strips them (cache.TransformStripManagedFields
		// or a transform of its own), and nothing else here watches.
		WithoutManagedFields: true,
	}).Wrap)
	return guarded
}
