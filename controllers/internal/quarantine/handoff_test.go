package quarantine

import (
	encjson "encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// clientWatch reads a watch stream as client-go does (the scheme's JSON
// decoder, which clears apiVersion and kind), counting its decodes into n.
func clientWatch(t *testing.T, body io.Reader, n *atomic.Int64) []watch.Event {
	t.Helper()
	codecs := serializer.NewCodecFactory(testScheme)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	objects := countingDecoder{Decoder: serializer.WithoutConversionCodecFactory{CodecFactory: codecs}.DecoderToVersion(info.Serializer, nil), n: n}
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(io.NopCloser(body)), info.StreamSerializer.Serializer), objects)
	var out []watch.Event
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			return out
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

// With a Handoff, a good ADDED or MODIFIED event of a kind it names
// reaches the client as a placeholder, and the cache's transform makes of
// it exactly the object client-go would have decoded from the API server's
// frame. DELETED events, other kinds, bad objects (quarantined as ever) and
// bookmarks pass as without it.
func TestHandoffGivesTheCacheTheObjectTheClientWouldDecode(t *testing.T) {
	h := NewHandoff(apiRuleGVK, virtualServiceGVK)
	g := New(testScheme, Options{Handoff: h})
	rule2 := strings.Replace(apiRule("good", `["good.example.com","two.example.com"]`, goodTime), `"resourceVersion":"7"`, `"resourceVersion":"8"`, 1)
	frames := []string{
		frame("ADDED", goodRule),
		frame("MODIFIED", rule2),
		frame("MODIFIED", badStatusRule),                           // status removed: passed whole
		frame("ADDED", apiRule("broken", `5`, goodTime)),           // dropped
		frame("ADDED", virtualService("vs", `["a.example"]`, "2")), // another kind it names
		frame("ADDED", istio("Gateway", "gw", `"3"`)),              // a kind it does not name
		frame("BOOKMARK", `{"kind":"APIRule","apiVersion":"gateway.portico.dev/v1alpha1","metadata":{"resourceVersion":"12"}}`),
		frame("DELETED", rule2),
	}
	stream := strings.Join(frames, "\n") + "\n"
	resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(stream)), nil)),
		"https://api/apis/gateway.portico.dev/v1alpha1/apirules?watch=true&allowWatchBookmarks=true")

	got := clientWatch(t, resp.Body, &atomic.Int64{})
	// What client-go makes of the API server's stream, untouched, with the
	// bad status removed and the broken object dropped as the guard does.
	unguarded := strings.Join(append(append(append([]string{}, frames[:2]...),
		frame("MODIFIED", strings.Replace(badStatusRule, `"lastTransitionTime":"2026-01-01T00:00:00z"`, `"lastTransitionTime":"2026-01-01T00:00:00Z"`, 1))),
		frames[4:]...), "\n")
	want := clientWatch(t, strings.NewReader(unguarded), &atomic.Int64{})
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	transform := h.Transform(nil)
	placeholders := 0
	for i := range got {
		if got[i].Type != want[i].Type {
			t.Errorf("event %d is %s, want %s", i, got[i].Type, want[i].Type)
		}
		m, err := meta.Accessor(got[i].Object)
		if err == nil && m.GetAnnotations()[HandedOff] != "" {
			placeholders++
		}
		obj, err := transform(got[i].Object)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if i == 2 { // the guard removed a bad status; compare the spec only
			if r := obj.(*porticov1alpha1.APIRule); len(r.Status.Conditions) != 0 || r.Name != "bad-status" {
				t.Errorf("event 2: %+v", r)
			}
			continue
		}
		// As JSON: Istio's objects hold protobuf messages, which only
		// protobuf compares; every field of these objects encodes.
		gotJSON, err1 := encjson.Marshal(obj)
		wantJSON, err2 := encjson.Marshal(want[i].Object)
		if err1 != nil || err2 != nil || string(gotJSON) != string(wantJSON) {
			t.Errorf("event %d: the cache gets\n%s\nwant\n%s", i, gotJSON, wantJSON)
		}
		if obj.(runtime.Object).GetObjectKind().GroupVersionKind() != want[i].Object.GetObjectKind().GroupVersionKind() {
			t.Errorf("event %d: kind %v, want %v as client-go decodes it", i, obj.(runtime.Object).GetObjectKind().GroupVersionKind(),
				want[i].Object.GetObjectKind().GroupVersionKind())
		}
	}
	if placeholders != 3 {
		t.Errorf("%d placeholders, want 3 (the good ADDED and MODIFIED events of the kinds named)", placeholders)
	}
	if n := h.holding(); n != 0 {
		t.Errorf("the handoff still holds %d objects after the cache took them", n)
	}
}

// Per event, the client decodes a placeholder and the guard decodes the
// object once: no whole object is decoded twice.
func TestHandoffOneWholeDecodePerEvent(t *testing.T) {
	guardDecodes, clientDecodes := &atomic.Int64{}, &atomic.Int64{}
	h := NewHandoff(apiRuleGVK)
	g := New(testScheme, Options{Handoff: h})
	countDecodes(g, guardDecodes)
	const events = 50
	var frames []string
	for i := range events {
		frames = append(frames, frame("MODIFIED", apiRule(fmt.Sprint("rule-", i), `["a.example.com"]`, goodTime)))
	}
	resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(strings.Join(frames, "\n"))), nil)),
		"https://api/apis/gateway.portico.dev/v1alpha1/apirules?watch=true")
	got := clientWatch(t, resp.Body, clientDecodes)
	transform := h.Transform(nil)
	for i, ev := range got {
		if ev.Object.(*porticov1alpha1.APIRule).Spec.Hosts != nil {
			t.Fatalf("event %d reached the client whole", i)
		}
		obj, err := transform(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if r := obj.(*porticov1alpha1.APIRule); len(r.Spec.Hosts) != 1 || r.Name != fmt.Sprint("rule-", i) {
			t.Fatalf("event %d: the cache got %s with hosts %v", i, r.Name, r.Spec.Hosts)
		}
	}
	if len(got) != events || guardDecodes.Load() != events || clientDecodes.Load() != events {
		t.Errorf("%d events: the guard decoded %d objects, the client %d placeholders; want %d each",
			len(got), guardDecodes.Load(), clientDecodes.Load(), events)
	}
}

// Lists and single objects are never handed off.
func TestHandoffLeavesListsAndObjectsWhole(t *testing.T) {
	h := NewHandoff(apiRuleGVK)
	g := New(testScheme, Options{Handoff: h})
	body := list("gateway.portico.dev/v1alpha1", "APIRuleList", goodRule)
	resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(body)), nil)),
		"https://api/apis/gateway.portico.dev/v1alpha1/apirules")
	if got := readAll(t, resp); got != body {
		t.Errorf("the list changed: %s", got)
	}
	resp = get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(goodRule)), nil)),
		"https://api/apis/gateway.portico.dev/v1alpha1/namespaces/team-a/apirules/good")
	if got := readAll(t, resp); got != goodRule {
		t.Errorf("the object changed: %s", got)
	}
	if n := h.holding(); n != 0 {
		t.Errorf("the handoff holds %d objects", n)
	}
}

// The transform takes an object once, and only for its own placeholder: a
// placeholder whose object is gone, or names another object, is an error
// (the informer watches again), never another object in the cache. An
// object that merely looks like one (an annotation key without the space,
// which the API server would refuse anyway) passes as it is.
func TestHandoffTransformRefusesWhatItDoesNotHold(t *testing.T) {
	h := NewHandoff(apiRuleGVK)
	held := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team-a", UID: "uid-a", ResourceVersion: "5"}}
	token := h.hold(held)
	placeholder := func(name, uid, rv, tok string) *porticov1alpha1.APIRule {
		return &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID(uid),
			ResourceVersion: rv, Annotations: map[string]string{HandedOff: tok}}}
	}
	transform := h.Transform(func(obj any) (any, error) {
		obj.(*porticov1alpha1.APIRule).Labels = map[string]string{"next": "ran"}
		return obj, nil
	})
	for name, p := range map[string]*porticov1alpha1.APIRule{
		"another name":             placeholder("b", "uid-a", "5", token),
		"another UID":              placeholder("a", "uid-b", "5", token),
		"another resource version": placeholder("a", "uid-a", "6", token),
	} {
		if _, err := transform(p); err == nil {
			t.Errorf("%s: the transform took the object held for another", name)
		}
		token = h.hold(held) // a refused placeholder's token is spent
	}
	if _, err := transform(placeholder("a", "uid-a", "5", "not-a-token")); err == nil {
		t.Error("a token never given found an object")
	}
	got, err := transform(placeholder("a", "uid-a", "5", token))
	if err != nil || got != held || held.Labels["next"] != "ran" {
		t.Fatalf("the placeholder of the held object: %v, %v", got, err)
	}
	if _, err := transform(placeholder("a", "uid-a", "5", token)); err == nil {
		t.Error("the object was taken twice")
	}
	lookalike := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"portico.dev/handed-off": "1"}}}
	if got, err := transform(lookalike); err != nil || got != lookalike {
		t.Errorf("an object without the annotation: %v, %v", got, err)
	}
}

// A Handoff holds at most handoffWindow objects: those of events whose
// watch stopped before the cache took them are let go.
func TestHandoffHoldsAWindow(t *testing.T) {
	h := NewHandoff(virtualServiceGVK)
	for i := range handoffWindow + 100 {
		h.hold(&networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}})
	}
	if n := h.holding(); n != handoffWindow {
		t.Errorf("holds %d objects, want %d", n, handoffWindow)
	}
	if _, ok := h.take("1"); ok {
		t.Error("the oldest object is still held")
	}
	if _, ok := h.take(fmt.Sprint(handoffWindow + 100)); !ok {
		t.Error("the newest object is gone")
	}
}

// FuzzHandoff: whatever the watch stream, the cache gets through the
// handoff exactly the events it gets from the same guard without one —
// same types, same objects as client-go decodes them — no transform
// fails, and nothing stays held once the cache took every event. A stream
// whose objects carry the placeholder's annotation is none the API server
// sends (it refuses the key: TestHandoffCacheHoldsTheStoredObjects), and
// the transform refuses such an object as a placeholder it never gave.
func FuzzHandoff(f *testing.F) {
	for _, seed := range []string{
		frame("ADDED", goodRule) + "\n" + frame("MODIFIED", badStatusRule) + "\n" + frame("DELETED", goodRule),
		frame("ADDED", apiRule("broken", `5`, goodTime)) + "\n" + frame("MODIFIED", goodRule),
		frame("ADDED", virtualService("vs", `["a.example"]`, "2")) + "\n" + frame("ADDED", istio("Gateway", "gw", `"3"`)),
		frame("ADDED", ruleWithMetadata(`"name":"a",`+managedFields)),
		frame("ADDED", strings.Replace(goodRule, `"metadata":{`, `"metadata":{"annotations":{"portico.dev/handed off":"1"},`, 1)),
		frame("ADDED", goodRule) + "\n" + frame("ADDED", goodRule),
		`{"type":"ADDED","object":{"kind":"APIRule","apiVersion":"gateway.portico.dev/v1alpha1","metadata":{"name":"x","uid":"u"}}}`,
	} {
		f.Add([]byte(seed))
	}
	const url = "https://api/apis/gateway.portico.dev/v1alpha1/apirules?watch=true"
	f.Fuzz(func(t *testing.T, stream []byte) {
		events := func(g *Guard) []watch.Event {
			resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(string(stream))), nil)), url)
			defer resp.Body.Close()
			return clientWatch(t, resp.Body, &atomic.Int64{})
		}
		h := NewHandoff(apiRuleGVK, virtualServiceGVK)
		got, want := events(New(testScheme, Options{Handoff: h})), events(New(testScheme, Options{}))
		for _, e := range want {
			if m, err := meta.Accessor(e.Object); err == nil && hasKey(m.GetAnnotations(), HandedOff) {
				return
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d events through the handoff, %d without it", len(got), len(want))
		}
		transform := h.Transform(nil)
		for i := range got {
			obj, err := transform(got[i].Object)
			if err != nil {
				t.Fatalf("event %d: the transform refused: %v", i, err)
			}
			gotJSON, err1 := encjson.Marshal(obj)
			wantJSON, err2 := encjson.Marshal(want[i].Object)
			if got[i].Type != want[i].Type || err1 != nil || err2 != nil || string(gotJSON) != string(wantJSON) {
				t.Fatalf("event %d: the cache gets %s\n%s (%v)\nwithout the handoff %s\n%s (%v)", i, got[i].Type, gotJSON, err1, want[i].Type, wantJSON, err2)
			}
		}
		if n := h.holding(); n != 0 {
			t.Fatalf("the handoff still holds %d objects after the cache took them", n)
		}
	})
}

func hasKey(m map[string]string, key string) bool { _, ok := m[key]; return ok }
