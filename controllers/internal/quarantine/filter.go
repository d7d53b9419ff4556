package quarantine

import (
	"bytes"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// filter holds the pure filtering of JSON documents: it returns what to pass
// on and reports what it set aside, with no side effects.
type filter struct {
	scheme  *runtime.Scheme
	decoder runtime.Decoder
}

func newFilter(scheme *runtime.Scheme) filter {
	return filter{scheme: scheme, decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer()}
}

// document filters a whole response body: a list or a single object.
func (f filter) document(body []byte) ([]byte, []Report) {
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

// list filters the items of a list response: items that decode only without
// status lose it, items that do not decode at all are left out.
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
	var ev watchFrame
	if json.Unmarshal(frame, &ev) != nil {
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
	if gvk.Group == metav1.GroupName || gvk.Kind == "Status" || !f.scheme.Recognizes(gvk) {
		return schema.GroupVersionKind{}, false
	}
	return gvk, true
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
