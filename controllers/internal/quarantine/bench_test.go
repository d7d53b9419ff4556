package quarantine

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// benchList is an APIRule list of n good items as the API server serves a
// custom resource's list: keys sorted, so "items" before "kind".
func benchList(n int) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = apiRule(fmt.Sprintf("rule-%d", i), `["a.example.com","b.example.com"]`, goodTime)
	}
	return []byte(`{"apiVersion":"gateway.portico.dev/v1alpha1","items":[` + strings.Join(items, ",") +
		`],"kind":"APIRuleList","metadata":{"resourceVersion":"10"}}`)
}

func BenchmarkFilterEvent(b *testing.B) {
	f := newFilter(testScheme)
	for name, obj := range map[string]string{"APIRule": goodRule, "VirtualService": goodVirtualSvc} {
		ev := []byte(frame("MODIFIED", obj))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for b.Loop() {
				if out, _ := f.event(ev); len(out) != len(ev) {
					b.Fatal("changed")
				}
			}
		})
	}
}

func BenchmarkFilterList(b *testing.B) {
	f := newFilter(testScheme)
	body := benchList(1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if out, _ := f.document(body); len(out) != len(body) {
			b.Fatal("changed")
		}
	}
}

// BenchmarkWatchEventManagedFields is an APIRule's MODIFIED event as the
// bench's API server sent it to the apirule controller (testdata: its
// managed fields, two managers, are 46% of its bytes) through the guard and
// the client's decode, with and without WithoutManagedFields.
func BenchmarkWatchEventManagedFields(b *testing.B) {
	obj, err := os.ReadFile("testdata/apirule-watched.json")
	if err != nil {
		b.Fatal(err)
	}
	ev := []byte(frame("MODIFIED", strings.TrimSpace(string(obj))))
	decoder := serializer.NewCodecFactory(testScheme).UniversalDeserializer()
	for _, without := range []bool{false, true} {
		f := newFilter(testScheme)
		f.withoutManagedFields = without
		b.Run(fmt.Sprintf("withoutManagedFields=%v", without), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for b.Loop() {
				out, _, whole := f.line(ev)
				var wf watchFrame
				if !whole || json.Unmarshal(out, &wf) != nil {
					b.Fatal("not passed on")
				}
				if _, _, err := decoder.Decode(wf.Object, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWatchEventHandoff is the same APIRule event (managed fields
// removed, as the controllers run) through the guard, client-go's decode of
// what it passes on and the cache's transform: whole (decoded by the guard
// and again by the client) and handed off (decoded whole by the guard
// only; the client decodes the placeholder). Compare the two in the same
// run.
func BenchmarkWatchEventHandoff(b *testing.B) {
	obj, err := os.ReadFile("testdata/apirule-watched.json")
	if err != nil {
		b.Fatal(err)
	}
	ev := []byte(frame("MODIFIED", strings.TrimSpace(string(obj))))
	decoder := serializer.NewCodecFactory(testScheme).UniversalDeserializer()
	for name, h := range map[string]*Handoff{"whole": nil, "handoff": NewHandoff(apiRuleGVK)} {
		f := newFilter(testScheme)
		f.withoutManagedFields = true
		f.handoff = h
		transform := h.Transform(nil)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, _, whole := f.line(ev)
				var wf watchFrame
				if !whole || json.Unmarshal(out, &wf) != nil {
					b.Fatal("not passed on")
				}
				got, _, err := decoder.Decode(wf.Object, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if h != nil {
					if _, err := transform(got); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
