package quarantine

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reason says what the guard did with an object that does not decode.
type Reason string

const (
	// StatusRemoved means the object decodes without its status and was passed
	// on without it; its owner rewrites status.
	StatusRemoved Reason = "StatusRemoved"
	// Dropped means the object was left out of a list or a watch stream (a
	// MODIFIED event became DELETED); controllers ignore it until it is fixed.
	Dropped Reason = "Dropped"
	// Undecodable means a single-object response was passed on unchanged; the
	// requests for that object fail until it is fixed.
	Undecodable Reason = "Undecodable"
)

// Report describes one quarantined object.
type Report struct {
	GVK             schema.GroupVersionKind
	Namespace       string
	Name            string
	UID             types.UID
	ResourceVersion string
	Reason          Reason
	// Err is why the object, as the API server sent it, does not decode.
	Err error
}

// Message says in a sentence what is wrong with the object and what the
// controllers do about it. It names nothing but the object itself.
func (r Report) Message() string {
	var consequence string
	switch r.Reason {
	case StatusRemoved:
		consequence = "its status is ignored and will be rewritten by its owner"
	case Dropped:
		consequence = "controllers ignore the object until it is fixed"
	default:
		consequence = "requests for the object fail until it is fixed"
	}
	return fmt.Sprintf("%s %s does not decode (%v): %s", r.GVK.Kind, r.Name, r.Err, consequence)
}

// key identifies the report of one version of one object, for deduplication.
func (r Report) key() string {
	return fmt.Sprintf("%s|%s|%s|%s|%s|%s", r.GVK, r.Namespace, r.Name, r.UID, r.ResourceVersion, r.Reason)
}

// identity is the part of an object's metadata a report names.
type identity struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// identify reads what it can of an object's identity; fields that do not
// parse stay empty.
func identify(raw []byte) identity {
	var obj struct {
		Metadata identity `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &obj) // best effort: keeps the fields that parse
	return obj.Metadata
}

func newReport(raw []byte, gvk schema.GroupVersionKind, reason Reason, err error) Report {
	id := identify(raw)
	return Report{
		GVK: gvk, Namespace: id.Namespace, Name: id.Name, UID: types.UID(id.UID),
		ResourceVersion: id.ResourceVersion, Reason: reason, Err: err,
	}
}

// quarantined counts the object versions set aside, by kind and reason; no
// names, so that its cardinality stays bounded by the scheme.
var quarantined = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "portico_quarantined_objects_total",
	Help: "Object versions of a watched kind that did not decode into their Go type, by what the controller did: " +
		"StatusRemoved (passed on without status), Dropped (left out of lists and watches), " +
		"Undecodable (a single-object response left unchanged).",
}, []string{"group", "kind", "reason"})

func init() {
	metrics.Registry.MustRegister(quarantined)
}

// maxSeen bounds the memory of reports already made; when full it starts
// over, at worst repeating a report.
const maxSeen = 4096

// seen remembers which reports were made, so that a relist or a repeated
// request does not repeat them.
type seen struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

// first reports whether key is seen for the first time, and remembers it.
func (s *seen) first(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return false
	}
	if s.keys == nil || len(s.keys) >= maxSeen {
		s.keys = make(map[string]struct{})
	}
	s.keys[key] = struct{}{}
	return true
}
