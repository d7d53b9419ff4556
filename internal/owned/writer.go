package owned

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operations a Writer reports to Written.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
)

// Owns reports whether obj is the owner's: the proof the Writer asks for
// before it updates or deletes anything.
type Owns func(obj client.Object) bool

// ControlledBy proves ownership by a controller reference to owner (by
// UID, so not a former owner of the same name) and, when namespace is not
// empty, the owner's namespace: owner references across namespaces are
// invalid, so an object elsewhere that names the owner is never its.
// Labels are a claim, never a proof.
func ControlledBy(owner metav1.Object, namespace string) Owns {
	return func(obj client.Object) bool {
		return (namespace == "" || obj.GetNamespace() == namespace) && metav1.IsControlledBy(obj, owner)
	}
}

// Observer is told of every create and update before it is sent (Begin)
// and of its outcome (End, with the object as written when it succeeded):
// a controller's filter of its own writes' watch events.
type Observer interface {
	Begin(obj client.Object)
	End(obj client.Object, written bool)
}

// Writer writes and removes the objects of the kinds of its table.
type Writer struct {
	// Client reads the cache and writes; Reader reads past the cache.
	Client client.Client
	Reader client.Reader
	Kinds  Table
	// FieldOwner is the field manager of creates and updates ("" sends
	// none).
	FieldOwner string
	// Observer, when set, sees every create and update.
	Observer Observer
	// Written, when set, counts every write that succeeded.
	Written func(obj client.Object, kind, operation string)
	// Deleted are the objects the Writer deleted, for a while.
	Deleted Tombstones
	// Apply makes every create and update a server-side apply, as
	// FieldOwner (required) with forced ownership of the fields sent: for
	// objects whose fields others may own beside the controller, and
	// whose whole desired state is re-sent on every change. An apply would
	// take over an object of someone else's, so a name the cache does not
	// show is first read past the cache (its metadata only) and left alone
	// unless owns proves it the owner's; and an apply over an object
	// carries that object's UID, so it fails rather than take over an
	// object that replaced it meanwhile.
	Apply bool
	// DeleteOptions are added to every delete (beside the UID
	// precondition).
	DeleteOptions []client.DeleteOption

	mu sync.Mutex
	// applied remembers the last apply of each object, by kind and key
	// (ApplyConfiguration).
	applied map[string]applied
}

func (w *Writer) writeOptions() []client.CreateOption {
	if w.FieldOwner == "" {
		return nil
	}
	return []client.CreateOption{client.FieldOwner(w.FieldOwner)}
}

func (w *Writer) written(ctx context.Context, obj client.Object, op, logged string) {
	kind := w.Kinds.Name(obj)
	if w.Written != nil {
		w.Written(obj, kind, op)
	}
	ctrl.LoggerFrom(ctx).V(1).Info(logged, "kind", kind, "object", klog.KObj(obj))
}

// Live reads the live counterpart of every desired object from the cache.
// An object the cache lacks is taken as missing (Write creates it and finds
// out otherwise), unless pastCache asks the API server, which also has the
// objects the cache does not hold. A cached copy of an object the Writer
// deleted is read again past the cache. It returns nil for an object that
// does not exist yet, and names every object found that owns denies.
func (w *Writer) Live(ctx context.Context, owns Owns, desired []client.Object, pastCache bool) ([]client.Object, []string, error) {
	live := make([]client.Object, len(desired))
	var conflicts []string
	for i, d := range desired {
		obj := newLike(d)
		key := client.ObjectKeyFromObject(d)
		err := w.Client.Get(ctx, key, obj)
		if (pastCache && apierrors.IsNotFound(err)) || (err == nil && w.Deleted.Has(obj.GetUID())) {
			err = w.Reader.Get(ctx, key, obj)
		}
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("read %s %s: %w", w.Kinds.Name(d), key, err)
		case !owns(obj):
			conflicts = append(conflicts, fmt.Sprintf("%s %s exists", w.Kinds.Name(d), key))
			continue
		}
		live[i] = obj
	}
	return live, conflicts, nil
}

// Write creates desired when live is nil, or updates live, which must be
// owned, when it differs. It returns the object it created, or the
// conflict when another's object holds the name. A create that meets an
// existing object (the cache had not seen it, or holds only the owner's
// objects) reads it past the cache and updates it if it is owned.
func (w *Writer) Write(ctx context.Context, owns Owns, desired, live client.Object) (client.Object, string, error) {
	if live != nil {
		return nil, "", w.Update(ctx, desired, live)
	}
	kind, key := w.Kinds.Name(desired), client.ObjectKeyFromObject(desired)
	if w.Apply {
		return w.applyNew(ctx, owns, desired)
	}
	obj := desired.DeepCopyObject().(client.Object)
	w.begin(obj)
	err := w.Client.Create(ctx, obj, w.writeOptions()...)
	w.end(obj, err == nil)
	if err == nil {
		w.written(ctx, obj, Create, "Created")
		return obj, "", nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, "", fmt.Errorf("create %s %s: %w", kind, key, err)
	}
	live = newLike(desired)
	if err := w.Reader.Get(ctx, key, live); err != nil {
		// Gone again (NotFound) or unreadable: the retry looks again.
		return nil, "", fmt.Errorf("read %s %s, which exists: %w", kind, key, err)
	}
	if !owns(live) {
		return nil, fmt.Sprintf("%s %s exists", kind, key), nil
	}
	return nil, "", w.Update(ctx, desired, live)
}

// Update updates an owned object that differs from the desired one: its
// spec, the desired labels (others' labels stay) and the desired owner
// references (others' stay). It carries the resourceVersion of live, whose
// ownership the caller checked, so it fails rather than overwrite an
// object that replaced it meanwhile; server-side apply with force would
// take it over instead.
func (w *Writer) Update(ctx context.Context, desired, live client.Object) error {
	kind := w.Kinds.Of(desired)
	if kind == nil {
		return fmt.Errorf("update %T %s: not a kind the controller writes", desired, client.ObjectKeyFromObject(desired))
	}
	if UpToDate(kind, desired, live) {
		return nil
	}
	if w.Apply {
		return w.apply(ctx, desired, live.GetUID(), Update)
	}
	updated := live.DeepCopyObject().(client.Object)
	withoutObserved(updated)
	labels := updated.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	updated.SetLabels(labels)
	for _, ref := range desired.GetOwnerReferences() {
		refs := updated.GetOwnerReferences()
		for i := range refs {
			if refs[i].UID == ref.UID {
				refs = append(refs[:i], refs[i+1:]...)
				break
			}
		}
		updated.SetOwnerReferences(append(refs, ref))
	}
	kind.CopySpec(updated, desired)
	w.begin(updated)
	var opts []client.UpdateOption
	if w.FieldOwner != "" {
		opts = append(opts, client.FieldOwner(w.FieldOwner))
	}
	err := w.Client.Update(ctx, updated, opts...)
	w.end(updated, err == nil)
	if err != nil {
		return fmt.Errorf("update %s %s: %w", kind.Name, client.ObjectKeyFromObject(desired), err)
	}
	w.written(ctx, desired, Update, "Updated")
	return nil
}

// UpToDate reports whether live has desired's spec, labels and owner
// references (live may have more labels and owner references). A live
// copy that went through Observe has no spec: its ObservedSpec, which only
// Observe can set, is compared with desired's SpecHash instead.
func UpToDate(kind *Kind, desired, live client.Object) bool {
	for k, v := range desired.GetLabels() {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	for _, want := range desired.GetOwnerReferences() {
		found := false
		for _, got := range live.GetOwnerReferences() {
			found = found || equality.Semantic.DeepEqual(want, got)
		}
		if !found {
			return false
		}
	}
	if observed, ok := observedHash(live); ok {
		return kind.SpecHash != nil && observed == kind.SpecHash(desired)
	}
	return kind.SpecEqual(desired, live)
}

// Delete deletes the owned objects among objs that are not in keep (by
// Table.ID), with their UID as precondition, and returns how many of them
// remain (being deleted: another's finalizer holds them). Objects owns
// denies are never deleted, whatever their labels.
func (w *Writer) Delete(ctx context.Context, owns Owns, objs []client.Object, keep map[string]bool) (int, error) {
	var errs []error
	remaining := 0
	for _, obj := range objs {
		if keep[w.Kinds.ID(obj)] || !owns(obj) {
			continue
		}
		if !obj.GetDeletionTimestamp().IsZero() {
			remaining++
			continue
		}
		uid := obj.GetUID()
		err := w.Client.Delete(ctx, obj, append([]client.DeleteOption{client.Preconditions{UID: &uid}}, w.DeleteOptions...)...)
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", w.Kinds.Name(obj), client.ObjectKeyFromObject(obj), err))
			continue
		}
		if err == nil {
			w.written(ctx, obj, Delete, "Deleted")
		}
		w.Deleted.Add(uid)
	}
	return remaining, errors.Join(errs...)
}

// Remove deletes the object of obj's kind named key, read past the cache,
// if it is owned.
func (w *Writer) Remove(ctx context.Context, owns Owns, obj client.Object, key client.ObjectKey) error {
	if err := w.Reader.Get(ctx, key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	_, err := w.Delete(ctx, owns, []client.Object{obj}, nil)
	return err
}

// applyNew applies desired, which the cache does not show: after a read
// past the cache of its name (metadata only), which must be free or the
// owner's.
func (w *Writer) applyNew(ctx context.Context, owns Owns, desired client.Object) (client.Object, string, error) {
	kind, key := w.Kinds.Name(desired), client.ObjectKeyFromObject(desired)
	gvk, err := w.Client.GroupVersionKindFor(desired)
	if err != nil {
		return nil, "", fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(gvk)
	err = w.Reader.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", w.apply(ctx, desired, "", Create)
	case err != nil:
		return nil, "", fmt.Errorf("read %s %s: %w", kind, key, err)
	case !owns(existing):
		return nil, fmt.Sprintf("%s %s exists", kind, key), nil
	}
	return nil, "", w.apply(ctx, desired, existing.GetUID(), Update)
}

// apply server-side applies desired (over the object of that UID, when
// uid is set) and reports the write as operation.
func (w *Writer) apply(ctx context.Context, desired client.Object, uid types.UID, operation string) error {
	kind, key := w.Kinds.Name(desired), client.ObjectKeyFromObject(desired)
	gvk, err := w.Client.GroupVersionKindFor(desired)
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	raw, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", kind, key, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return fmt.Errorf("convert %s %s: %w", kind, key, err)
	}
	// Typed Istio objects have no apply configurations, so the object goes
	// through its own JSON (which the proto messages marshal faithfully).
	// Status is a subresource; the server's own fields are not sent.
	unstructured.RemoveNestedField(u.Object, "status")
	u.SetGroupVersionKind(gvk)
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	u.SetCreationTimestamp(metav1.Time{})
	u.SetUID(uid)
	w.begin(desired)
	err = w.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(w.FieldOwner), client.ForceOwnership)
	w.end(desired, err == nil)
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	w.written(ctx, desired, operation, "Applied")
	return nil
}

func (w *Writer) begin(obj client.Object) {
	if w.Observer != nil {
		w.Observer.Begin(obj)
	}
}

func (w *Writer) end(obj client.Object, written bool) {
	if w.Observer != nil {
		w.Observer.End(obj, written)
	}
}
