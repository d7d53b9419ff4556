package quarantine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// HandedOff is the annotation of the placeholder a Handoff passes on in a
// watch event instead of an object the guard decoded: its value is the
// token under which the Handoff holds that object. Its key has a space,
// which the API server refuses in every annotation key: no stored object
// can carry it, so a tenant cannot make the cache take one object for
// another; only the guard writes it.
const HandedOff = "portico.dev/handed off"

// handoffWindow is how many objects a Handoff holds at most: an object
// not taken by the time this many more were handed off (its watch stopped
// between the guard and the cache) is let go. A cache takes each object
// a few events after the guard decoded it, one watch event at a time.
const handoffWindow = 4096

// Handoff lets the client skip the second decode of a watch event's
// object for the kinds it names: the guard, which has just decoded the
// object whole to check it, holds it and passes on in its place a
// placeholder (kind, name, namespace, UID, resourceVersion and the
// HandedOff token), which the client decodes in a fraction of the time;
// the cache's transform (Transform) then takes the held object in place of
// the placeholder. Issue 45: an APIRule's watch events were decoded twice,
// a sixth of the apirule controller's CPU at 10,000 APIRules.
//
// Every cache that watches a kind the Handoff names must have its
// Transform: a placeholder reaching a cache without it would be an object
// with no spec. Watches other than the caches' must not be made with a
// guard that hands off their kind. DELETED events, lists and single
// objects are never handed off.
type Handoff struct {
	kinds map[schema.GroupVersionKind]bool

	mu   sync.Mutex
	seq  uint64
	held map[uint64]runtime.Object
}

// NewHandoff returns a Handoff of the objects of kinds.
func NewHandoff(kinds ...schema.GroupVersionKind) *Handoff {
	h := &Handoff{kinds: map[schema.GroupVersionKind]bool{}, held: map[uint64]runtime.Object{}}
	for _, k := range kinds {
		h.kinds[k] = true
	}
	return h
}

// wants reports whether the guard hands off a watch event of typ of an
// object of gvk.
func (h *Handoff) wants(typ watch.EventType, gvk schema.GroupVersionKind) bool {
	return h != nil && (typ == watch.Added || typ == watch.Modified) && h.kinds[gvk]
}

// placeholder is what a watch event carries in place of a handed-off
// object.
type placeholder struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Metadata   placeholderMetadata `json:"metadata"`
}

type placeholderMetadata struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace,omitempty"`
	UID             types.UID         `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Annotations     map[string]string `json:"annotations"`
}

// frame holds obj, which the guard decoded from an event of typ, and
// returns the event carrying its placeholder; nil (hold nothing) when obj
// has no metadata or the frame does not encode.
func (h *Handoff) frame(typ watch.EventType, obj runtime.Object, gvk schema.GroupVersionKind) []byte {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetResourceVersion() == "" {
		return nil
	}
	p := placeholder{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Metadata: placeholderMetadata{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		Annotations: map[string]string{HandedOff: h.hold(obj)},
	}}
	// Strings only: it encodes (were it not to, the object held would be
	// let go with the window).
	raw, err := json.Marshal(&p)
	if err != nil {
		return nil
	}
	return marshal(watchFrame{Type: typ, Object: raw})
}

// hold keeps obj until it is taken, or until handoffWindow objects were
// held after it, and returns its token.
func (h *Handoff) hold(obj runtime.Object) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.held[h.seq] = obj
	if h.seq > handoffWindow {
		delete(h.held, h.seq-handoffWindow)
	}
	return strconv.FormatUint(h.seq, 10)
}

// take returns the object held under token and lets it go.
func (h *Handoff) take(token string) (runtime.Object, bool) {
	seq, err := strconv.ParseUint(token, 10, 64)
	if err != nil {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	obj, ok := h.held[seq]
	delete(h.held, seq)
	return obj, ok
}

// handedOff is the number of objects handed off so far, for tests.
func (h *Handoff) handedOff() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// holding is the number of objects held, for tests.
func (h *Handoff) holding() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// Transform returns a cache transform that replaces a placeholder by the
// object the guard held for it, as client-go's decoder would have made it
// (no apiVersion and kind), then applies next (when set) to what it has.
// Any other object goes to next as it is. A placeholder whose object is
// gone, or is another object, is an error: the informer watches again,
// and the next events bring the objects anew.
func (h *Handoff) Transform(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		out := in
		if m, ok := in.(metaObject); ok {
			if token, ok := m.GetAnnotations()[HandedOff]; ok {
				obj, err := h.takeFor(m, token)
				if err != nil {
					return nil, err
				}
				out = obj
			}
		}
		if next == nil {
			return out, nil
		}
		return next(out)
	}
}

// metaObject is what Transform reads of a placeholder.
type metaObject interface {
	GetAnnotations() map[string]string
	GetNamespace() string
	GetName() string
	GetUID() types.UID
	GetResourceVersion() string
}

// takeFor takes the object held for placeholder p under token and checks
// that it is p's object.
func (h *Handoff) takeFor(p metaObject, token string) (runtime.Object, error) {
	obj, ok := h.take(token)
	if !ok {
		return nil, fmt.Errorf("the object handed off for %s/%s (resourceVersion %s) is gone", p.GetNamespace(), p.GetName(), p.GetResourceVersion())
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetUID() != p.GetUID() || m.GetResourceVersion() != p.GetResourceVersion() ||
		m.GetName() != p.GetName() || m.GetNamespace() != p.GetNamespace() {
		return nil, fmt.Errorf("the object handed off for %s/%s (resourceVersion %s) is another one", p.GetNamespace(), p.GetName(), p.GetResourceVersion())
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}
