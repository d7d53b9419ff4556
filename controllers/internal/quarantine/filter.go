package quarantine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kjson "sigs.k8s.io/json"
)

// filter holds the pure filtering of JSON documents: it returns what to pass
// on and reports what it set aside, with no side effects but the objects a
// handoff holds.
type filter struct {
	scheme  *runtime.Scheme
	decoder runtime.Decoder
	// checkItem says why a list item does not decode as the typed list
	// decode reads it (nil when it does). A field so that tests can watch
	// the walk through a list.
	checkItem func(item []byte, gvk schema.GroupVersionKind) error
	// unmarshal is the typed decode of an object whose kind is known
	// (decodeAs); a field so that tests can count it.
	unmarshal func(data []byte, obj any) error
	// slim, when set, replaces the object of a good watch event (Options.Slim).
	slim func(runtime.Object) runtime.Object
	// handoff, when set, holds the object of a good watch event of the
	// kinds it names and passes on a placeholder (Options.Handoff): the
	// filter's one side effect.
	handoff *Handoff
	// withoutManagedFields removes the managed fields of watch events'
	// objects (Options.WithoutManagedFields).
	withoutManagedFields bool
}

func newFilter(scheme *runtime.Scheme) filter {
	f := filter{scheme: scheme, decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer(),
		unmarshal: kjson.UnmarshalCaseSensitivePreserveInts}
	f.checkItem = f.decodeItem
	return f
}

// document filters a whole response body: a list or a single object. A
// body in the shape the API server writes is read without decoding it
// whole: a list item by item, an object once; any other shape takes the
// path that unmarshals the body to find its kind.
func (f filter) document(body []byte) ([]byte, []Report) {
	shape, ok := readShape(body)
	if !ok {
		return f.documentByUnmarshal(body)
	}
	if !f.concerned(shape.gvk) {
		return body, nil
	}
	item, isList := f.itemKind(shape.gvk)
	if !isList {
		return f.object(body, shape.gvk)
	}
	if shape.items != (span{}) {
		if out, reports, ok := f.items(body, shape.items, item); ok {
			return out, reports
		}
	}
	return f.list(body, shape.gvk, item)
}

// documentByUnmarshal is document for bodies of any shape.
func (f filter) documentByUnmarshal(body []byte) ([]byte, []Report) {
	gvk, ok := f.kindOf(body)
	if !ok {
		return body, nil
	}
	if item, ok := f.itemKind(gvk); ok {
		return f.list(body, gvk, item)
	}
	return f.object(body, gvk)
}

// object filters a single-object response. An object that decodes only
// without status is passed on without it; one that does not decode at all is
// passed on unchanged, so that only the request for it fails.
func (f filter) object(body []byte, gvk schema.GroupVersionKind) ([]byte, []Report) {
	out, err := f.clean(body, gvk)
	switch {
	case err == nil:
		return body, nil
	case out != nil:
		return out, []Report{newReport(body, gvk, StatusRemoved, err)}
	default:
		return body, []Report{newReport(body, gvk, Undecodable, err)}
	}
}

// items filters the items of a list response, body[items], one at a time:
// beyond the body it holds one item's decode, and the list passes on
// unchanged when every item decodes. Items that decode only without status
// lose it, items that do not decode at all are left out; only then is the
// list rewritten, around its other members as they were. ok is false when
// the items are no array it could walk.
func (f filter) items(body []byte, items span, gvk schema.GroupVersionKind) (out []byte, reports []Report, ok bool) {
	var rewritten *bytes.Buffer // nil while every item decodes
	wrote := false              // rewritten has an item
	first := -1                 // where the first item starts
	ok = elements(body, items, func(el span) bool {
		if first < 0 {
			first = el.start
		}
		raw := body[el.start:el.end]
		err := f.checkItem(raw, gvk)
		if err == nil && rewritten == nil {
			return true
		}
		if rewritten == nil {
			// The first bad item: copy the list up to it.
			rewritten = bytes.NewBuffer(make([]byte, 0, len(body)))
			rewritten.Write(body[:items.start])
			rewritten.WriteByte('[')
			good := bytes.TrimRight(body[first:el.start], ", \t\r\n")
			rewritten.Write(good)
			wrote = len(good) > 0
		}
		if err != nil {
			var reason Reason
			if raw, reason = f.cleanItem(raw, gvk); raw == nil {
				reports = append(reports, newReport(body[el.start:el.end], gvk, Dropped, err))
				return true
			}
			reports = append(reports, newReport(body[el.start:el.end], gvk, reason, err))
		}
		if wrote {
			rewritten.WriteByte(',')
		}
		rewritten.Write(raw)
		wrote = true
		return true
	})
	switch {
	case !ok:
		return nil, nil, false
	case rewritten == nil:
		return body, nil, true
	}
	rewritten.WriteByte(']')
	rewritten.Write(body[items.end:])
	return rewritten.Bytes(), reports, true
}

// cleanItem returns a list item that does not decode without its status
// when that decodes (reason StatusRemoved), or nil.
func (f filter) cleanItem(raw []byte, gvk schema.GroupVersionKind) ([]byte, Reason) {
	stripped := keep(raw, func(field string) bool { return field != "status" })
	if stripped != nil && f.checkItem(stripped, gvk) == nil {
		return stripped, StatusRemoved
	}
	return nil, Dropped
}

// decodeItem decodes a list item as the typed list decode does: into the
// item kind's type, whatever the item says its kind is.
func (f filter) decodeItem(item []byte, gvk schema.GroupVersionKind) error {
	obj, err := f.scheme.New(gvk)
	if err != nil {
		return err
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(item, obj)
}

// list filters the items of a list response of any shape, decoding it
// whole first: items that decode only without status lose it, items that
// do not decode at all are left out.
func (f filter) list(body []byte, gvk, itemGVK schema.GroupVersionKind) ([]byte, []Report) {
	if f.decodes(body, gvk) {
		return body, nil
	}
	var fields map[string]json.RawMessage
	var items []json.RawMessage
	if json.Unmarshal(body, &fields) != nil || json.Unmarshal(fields["items"], &items) != nil {
		return body, nil // not a list we understand: the client reports it
	}
	kept := make([]json.RawMessage, 0, len(items))
	var reports []Report
	for _, item := range items {
		out, err := f.clean(item, itemGVK)
		switch {
		case err == nil:
			kept = append(kept, item)
		case out != nil:
			kept = append(kept, out)
			reports = append(reports, newReport(item, itemGVK, StatusRemoved, err))
		default:
			reports = append(reports, newReport(item, itemGVK, Dropped, err))
		}
	}
	if len(reports) == 0 {
		return body, nil // every item decodes: the list fails for another reason
	}
	fields["items"] = marshal(kept)
	if out := marshal(fields); fields["items"] != nil && out != nil {
		return out, reports
	}
	return body, nil
}

// watchFrame is one event of a JSON watch stream.
type watchFrame struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// event filters one frame of a watch stream; nil means drop the frame.
// BOOKMARK and ERROR frames, and frames of kinds outside the scheme, pass
// unchanged. A bad object's ADDED event is dropped; its MODIFIED event
// becomes DELETED, so that caches forget the last good copy, and a DELETED
// event carries the object reduced to its metadata.
func (f filter) event(frame []byte) ([]byte, []Report) {
	frame = f.trimmed(frame)
	if typ, obj, ok := f.decodeEvent(frame); ok {
		return f.slimmed(frame, typ, obj), nil
	}
	return f.eventByUnmarshal(frame)
}

// line is event for a line of a watch stream, which may not be one frame
// (eventStream): whole reports that it is one JSON value, as the typed
// decode of an event's object proves (it accepts exactly one value, which
// leaves no room in the line for anything but the event's two members) or,
// for the frames it does not accept, a scan. A line that is not whole is
// passed on by nobody: the stream reads it again with a Decoder.
func (f filter) line(frame []byte) (out []byte, reports []Report, whole bool) {
	frame = f.trimmed(frame)
	if typ, obj, ok := f.decodeEvent(frame); ok {
		return f.slimmed(frame, typ, obj), nil, true
	}
	if !json.Valid(frame) {
		return nil, nil, false
	}
	out, reports = f.eventByUnmarshal(frame)
	return out, reports, true
}

// trimmed is frame without its object's managed fields when the filter
// removes them and frame is an object it can walk (withoutMember); else
// frame. A line that is two values, or part of one, is no object it can
// walk: it stays as it is, for line to find it not whole.
func (f filter) trimmed(frame []byte) []byte {
	if !f.withoutManagedFields {
		return frame
	}
	if out := withoutMember(frame, "object", "metadata", "managedFields"); out != nil {
		return out
	}
	return frame
}

// slimmed returns frame, or the event of typ with the object slim makes of
// obj (the frame's decoded object) when it makes one that encodes, or else
// with obj's placeholder when the handoff takes obj.
func (f filter) slimmed(frame []byte, typ watch.EventType, obj runtime.Object) []byte {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if f.slim == nil {
		return f.handedOff(frame, typ, obj, gvk)
	}
	out := f.slim(obj)
	if out == nil {
		return f.handedOff(frame, typ, obj, gvk)
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(out)
	if err != nil {
		return frame
	}
	slim := marshal(watchFrame{Type: typ, Object: raw})
	if slim == nil {
		return frame
	}
	return slim
}

// handedOff returns the event of typ with obj's placeholder when the
// handoff takes obj (of kind gvk), else frame.
func (f filter) handedOff(frame []byte, typ watch.EventType, obj runtime.Object, gvk schema.GroupVersionKind) []byte {
	if !f.handoff.wants(typ, gvk) {
		return frame
	}
	if out := f.handoff.frame(typ, obj, gvk); out != nil {
		return out
	}
	return frame
}

// goodEvent reports whether frame is certainly an event of a concerned
// kind whose object decodes, reading the frame as the API server writes it:
// its type and the object's kind from their leading bytes, then one typed
// decode. The decode must find the kind sniffed, and accepts the object
// only as exactly one JSON value, which leaves no room in the frame for
// other members; anything else takes the full path.
func (f filter) goodEvent(frame []byte) bool {
	_, _, ok := f.decodeEvent(frame)
	return ok
}

// decodeEvent is goodEvent that also returns the event's type and the
// object it decoded.
func (f filter) decodeEvent(frame []byte) (watch.EventType, runtime.Object, bool) {
	typ, raw, ok := sniffFrame(frame)
	if !ok || (typ != watch.Added && typ != watch.Modified && typ != watch.Deleted) {
		return "", nil, false
	}
	gvk, ok := sniffKind(raw)
	if !ok || !f.concerned(gvk) {
		return "", nil, false
	}
	obj, err := f.decodeAs(raw, gvk)
	if err != nil {
		return "", nil, false
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return typ, obj, true
}

// decodeAs decodes an object the way client-go's JSON decoder does, which
// first reads the whole object with encoding/json to find its kind
// (case-insensitively, so "KIND" counts) and then decodes it into that
// kind's type; it fails unless the kind is gvk. When a walk of the
// object's members proves that first reading would find gvk (its kind and
// apiVersion once each, in no other case, unescaped: readShape), only the
// typed decode is left to do (issue 45: the first reading was a seventh of
// the ratelimit controller's CPU, for the guard and the client each). Any
// other object takes the decoder's own path.
func (f filter) decodeAs(raw []byte, gvk schema.GroupVersionKind) (runtime.Object, error) {
	if shape, ok := readShape(raw); ok && shape.gvk == gvk {
		obj, err := f.scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		if err := f.unmarshal(raw, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
	obj, actual, err := f.decoder.Decode(raw, nil, nil)
	switch {
	case err != nil:
		return nil, err
	case actual == nil || *actual != gvk:
		return nil, fmt.Errorf("decoded as %v, not %v", actual, gvk)
	}
	return obj, nil
}

// eventByUnmarshal is event for frames of any shape. It reads the frame
// as client-go's watch decoder does: case-sensitive, the last of duplicate
// members wins.
func (f filter) eventByUnmarshal(frame []byte) ([]byte, []Report) {
	var ev watchFrame
	if kjson.UnmarshalCaseSensitivePreserveInts(frame, &ev) != nil {
		return frame, nil
	}
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return frame, nil
	}
	gvk, ok := f.kindOf(ev.Object)
	if !ok {
		return frame, nil
	}
	out, err := f.clean(ev.Object, gvk)
	switch {
	case err == nil:
		return frame, nil
	case out != nil:
		return marshal(watchFrame{Type: ev.Type, Object: out}), []Report{newReport(ev.Object, gvk, StatusRemoved, err)}
	}
	reports := []Report{newReport(ev.Object, gvk, Dropped, err)}
	if ev.Type == watch.Added {
		return nil, reports
	}
	reduced := f.reduce(ev.Object, gvk)
	if reduced == nil {
		return nil, reports
	}
	return marshal(watchFrame{Type: watch.Deleted, Object: reduced}), reports
}

// kindOf returns the kind of a JSON object when the filter is concerned
// with it: the scheme knows it, and it is no meta.k8s.io kind (Table,
// PartialObjectMetadata) nor a Status.
func (f filter) kindOf(raw []byte) (schema.GroupVersionKind, bool) {
	var tm metav1.TypeMeta
	if json.Unmarshal(raw, &tm) != nil || tm.Kind == "" || tm.APIVersion == "" {
		return schema.GroupVersionKind{}, false
	}
	gvk := tm.GroupVersionKind()
	return gvk, f.concerned(gvk)
}

// concerned reports whether the filter checks objects of a kind: the scheme
// knows it, and it is no meta.k8s.io kind nor a Status.
func (f filter) concerned(gvk schema.GroupVersionKind) bool {
	return gvk.Group != metav1.GroupName && gvk.Kind != "Status" && f.scheme.Recognizes(gvk)
}

// itemKind returns the kind of the items of a list kind: the list kind
// minus "List", which is what the items of built-in lists omit.
func (f filter) itemKind(list schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	kind, isList := strings.CutSuffix(list.Kind, "List")
	if !isList {
		return schema.GroupVersionKind{}, false
	}
	obj, err := f.scheme.New(list)
	if err != nil || !meta.IsListType(obj) {
		return schema.GroupVersionKind{}, false
	}
	item := list.GroupVersion().WithKind(kind)
	return item, f.scheme.Recognizes(item)
}

// clean returns raw and nil when it decodes as gvk. Otherwise it returns the
// decoding error with raw without status when that decodes, or with nil when
// nothing can be passed on.
func (f filter) clean(raw []byte, gvk schema.GroupVersionKind) ([]byte, error) {
	err := f.decode(raw, gvk)
	if err == nil {
		return raw, nil
	}
	if stripped := keep(raw, func(field string) bool { return field != "status" }); stripped != nil && f.decodes(stripped, gvk) {
		return stripped, err
	}
	return nil, err
}

// reduce returns the object reduced to apiVersion, kind and metadata, or to
// its bare identity when its metadata does not decode either; nil when
// neither decodes.
func (f filter) reduce(raw []byte, gvk schema.GroupVersionKind) []byte {
	if reduced := keep(raw, func(field string) bool {
		return field == "apiVersion" || field == "kind" || field == "metadata"
	}); reduced != nil && f.decodes(reduced, gvk) {
		return reduced
	}
	id := identify(raw)
	bare := marshal(map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata": metav1.ObjectMeta{
			Name: id.Name, Namespace: id.Namespace, UID: types.UID(id.UID), ResourceVersion: id.ResourceVersion,
		},
	})
	if f.decodes(bare, gvk) {
		return bare
	}
	return nil
}

func (f filter) decode(raw []byte, gvk schema.GroupVersionKind) error {
	// gvk is the default for items of built-in lists, which omit it.
	_, _, err := f.decoder.Decode(raw, &gvk, nil)
	return err
}

func (f filter) decodes(raw []byte, gvk schema.GroupVersionKind) bool {
	return f.decode(raw, gvk) == nil
}

// keep returns the JSON object raw with only the top-level fields wanted;
// nil when raw is not an object or nothing was removed.
func keep(raw []byte, wanted func(field string) bool) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	removed := false
	for field := range fields {
		if !wanted(field) {
			delete(fields, field)
			removed = true
		}
	}
	if !removed {
		return nil
	}
	return marshal(fields)
}

// marshal encodes v as compact JSON without HTML escaping; nil when it does
// not encode, which cannot happen with the values given here (JSON that was
// just parsed, and maps and structs of it).
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
