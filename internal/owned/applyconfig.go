package owned

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applied is what a Writer remembers of its last apply of one object
// (ApplyConfiguration).
type applied struct {
	// sent is the apply configuration as sent.
	sent []byte
	// owned is the Writer's fields in the server's response: what was
	// sent, completed by the server with its defaults.
	owned []byte
	// overRV is the resourceVersion of the live object it was applied
	// over; while the cache still shows that version or an older one (see
	// Behind), it has not seen the apply.
	overRV string
	// response is the object the server returned, without managedFields.
	response client.Object
}

// ApplyConfiguration server-side applies desired, a typed apply
// configuration of kind (which must have Extract) for the object
// namespace/name, as FieldOwner with forced ownership, unless that would
// change nothing. It returns the newest object it knows (the server's
// response to this apply or to one the cache has not caught up with, else
// live, nil when there is none) and whether it sent an apply. The caller
// proves live its own, and that a name the cache does not show is free.
//
// "Would change nothing" is judged on the fields FieldOwner owns on live
// (its managedFields entry). Fields others own (labels, annotations, a
// restartedAt stamp) do not count, so they are left alone and cause no
// write; a field the Writer owned that someone changed moved to their
// manager, differs, and is taken back with forced ownership.
//
// The server fills defaults into fields the Writer sets (a fieldRef's
// apiVersion), so the owned fields can differ from the rendered ones for
// ever. What counts is therefore also what the server returned when this
// same desired state was last applied: live is current when its owned
// fields equal either the rendering or that response.
func (w *Writer) ApplyConfiguration(ctx context.Context, kind *Kind, namespace, name string, desired any, live client.Object) (client.Object, bool, error) {
	key := kind.Name + "/" + namespace + "/" + name
	sent, err := json.Marshal(desired)
	if err != nil {
		return nil, false, fmt.Errorf("encode %s %s/%s: %w", kind.Name, namespace, name, err)
	}
	if live != nil {
		owned, err := w.ownedFields(kind, live)
		if err != nil {
			return nil, false, err
		}
		if bytes.Equal(owned, sent) {
			return live, false, nil
		}
		w.mu.Lock()
		last, ok := w.applied[key]
		w.mu.Unlock()
		if ok && bytes.Equal(last.sent, sent) {
			if Behind(live.GetResourceVersion(), last.overRV, last.response.GetResourceVersion()) {
				return last.response, false, nil // the cache lags behind the apply
			}
			if bytes.Equal(owned, last.owned) {
				return live, false, nil
			}
		}
	}

	obj := kind.New()
	obj.SetNamespace(namespace)
	obj.SetName(name)
	err = w.Client.Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, sent), client.FieldOwner(w.FieldOwner), client.ForceOwnership)
	if err != nil {
		return nil, true, fmt.Errorf("apply %s %s/%s: %w", kind.Name, namespace, name, err)
	}
	owned, err := w.ownedFields(kind, obj)
	if err != nil {
		return nil, true, err
	}
	obj.SetManagedFields(nil)
	last := applied{sent: sent, owned: owned, response: obj}
	operation := Create
	if live != nil {
		last.overRV, operation = live.GetResourceVersion(), Update
	}
	w.mu.Lock()
	if w.applied == nil {
		w.applied = map[string]applied{}
	}
	w.applied[key] = last
	w.mu.Unlock()
	w.written(ctx, obj, operation, "Applied")
	return obj, true, nil
}

// ownedFields returns, as JSON, the fields FieldOwner owns on o.
func (w *Writer) ownedFields(kind *Kind, o client.Object) ([]byte, error) {
	if kind.Extract == nil {
		return nil, fmt.Errorf("%s: the kind has no Extract, so it cannot be applied as an apply configuration", kind.Name)
	}
	owned, err := kind.Extract(o, w.FieldOwner)
	if err != nil {
		return nil, fmt.Errorf("extract owned fields of %s %s: %w", kind.Name, o.GetName(), err)
	}
	return json.Marshal(owned)
}
