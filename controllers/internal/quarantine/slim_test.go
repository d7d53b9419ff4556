package quarantine

import (
	encjson "encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/portico-dev/portico/internal/owned"
)

// countingDecoder counts the decodes of a decoder.
type countingDecoder struct {
	runtime.Decoder
	n *atomic.Int64
}

func (d countingDecoder) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	d.n.Add(1)
	return d.Decoder.Decode(data, gvk, into)
}

// countDecodes makes n count every decode of the guard's filter: by its
// decoder, and the typed decodes of objects whose kind it proved.
func countDecodes(g *Guard, n *atomic.Int64) {
	g.filter.decoder = countingDecoder{Decoder: g.filter.decoder, n: n}
	unmarshal := g.filter.unmarshal
	g.filter.unmarshal = func(data []byte, obj any) error {
		n.Add(1)
		return unmarshal(data, obj)
	}
}

// slimVirtualService is a Slim that keeps a VirtualService's metadata and
// the number of its hosts, as a cache transform that digests the spec would.
func slimVirtualService(obj runtime.Object) runtime.Object {
	vs, ok := obj.(*networkingv1.VirtualService)
	if !ok {
		return nil
	}
	out := &networkingv1.VirtualService{ObjectMeta: vs.ObjectMeta}
	out.Annotations = map[string]string{"hosts": fmt.Sprint(len(vs.Spec.Hosts))}
	return out
}

func virtualService(name, hosts, observedGeneration string) string {
	return fmt.Sprintf(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService",`+
		`"metadata":{"name":%q,"namespace":"team-b","uid":"uid-%s","resourceVersion":"9","labels":{"app":"x"}},`+
		`"spec":{"hosts":%s,"http":[{"route":[{"destination":{"host":"b"}}]}]},"status":{"observedGeneration":%s}}`,
		name, name, hosts, observedGeneration)
}

// With Slim, a watch event of a good object is decoded once, by the guard:
// what it passes on is the slim object, which is all the client's decoder
// reads. Bad objects are quarantined as without Slim, and every other
// frame passes unchanged.
func TestSlimDecodesAWatchEventOnce(t *testing.T) {
	guardDecodes, slims := &atomic.Int64{}, &atomic.Int64{}
	g := New(testScheme, Options{Slim: func(obj runtime.Object) runtime.Object {
		slims.Add(1)
		return slimVirtualService(obj)
	}})
	countDecodes(g, guardDecodes)

	frames := []string{
		frame("ADDED", virtualService("one", `["a.example","b.example"]`, "2")),
		frame("MODIFIED", virtualService("one", `["a.example"]`, "3")),
		frame("MODIFIED", badVirtualSvc),                              // status removed, not slimmed
		frame("ADDED", virtualService("broken", `"not-a-list"`, "1")), // dropped
		frame("BOOKMARK", `{"kind":"VirtualService","apiVersion":"networking.istio.io/v1","metadata":{"resourceVersion":"12"}}`),
		frame("ADDED", goodRule), // another kind: Slim leaves it
		frame("DELETED", virtualService("one", `["a.example"]`, "3")),
	}
	src := strings.NewReader(strings.Join(frames, "\n") + "\n")
	resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(src), nil)),
		"https://api/apis/networking.istio.io/v1/virtualservices?watch=true")

	// Read the stream as client-go's watch does, counting the client's decodes.
	clientDecodes := &atomic.Int64{}
	codecs := serializer.NewCodecFactory(testScheme)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	objects := countingDecoder{Decoder: codecs.UniversalDeserializer(), n: clientDecodes}
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(resp.Body), info.StreamSerializer.Serializer), objects)
	var got []string
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			break
		}
		if vs, ok := obj.(*networkingv1.VirtualService); ok {
			got = append(got, fmt.Sprintf("%s %s hosts=%q spec=%d", typ, vs.Name, vs.Annotations["hosts"], len(vs.Spec.Hosts)))
		} else {
			got = append(got, fmt.Sprintf("%s %T", typ, obj))
		}
	}
	want := []string{
		`ADDED one hosts="2" spec=0`,
		`MODIFIED one hosts="1" spec=0`,
		`MODIFIED bad-vs hosts="" spec=0`,
		`BOOKMARK  hosts="" spec=0`,
		`ADDED *v1alpha1.APIRule`,
		`DELETED one hosts="1" spec=0`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := slims.Load(); n != 4 {
		t.Errorf("Slim saw %d objects, want the 4 good events of the scheme's kinds", n)
	}
	if n := clientDecodes.Load(); n != 6 {
		t.Errorf("the client decoded %d objects, want one per event passed on (6)", n)
	}
	// Each good object of the stream was decoded whole by the guard, once
	// (the two bad ones take the full path, which decodes more).
	if n := guardDecodes.Load(); n < 4 {
		t.Errorf("the guard decoded %d objects, fewer than the 4 good ones", n)
	}
}

// Count the decodes of a stream of good events only: one by the guard of
// the whole object, one by the client of the slim one, per event.
func TestSlimOneWholeDecodePerEvent(t *testing.T) {
	guardDecodes := &atomic.Int64{}
	g := New(testScheme, Options{Slim: slimVirtualService})
	countDecodes(g, guardDecodes)
	const events = 50
	var frames []string
	for i := range events {
		frames = append(frames, frame("MODIFIED", virtualService(fmt.Sprint("vs-", i), `["a.example","b.example"]`, "2")))
	}
	resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(strings.Join(frames, "\n"))), nil)),
		"https://api/apis/networking.istio.io/v1/virtualservices?watch=true")
	codecs := serializer.NewCodecFactory(testScheme)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(resp.Body), info.StreamSerializer.Serializer),
		codecs.UniversalDeserializer())
	whole := 0
	for {
		_, obj, err := dec.Decode()
		if err != nil {
			break
		}
		if vs := obj.(*networkingv1.VirtualService); len(vs.Spec.Hosts) > 0 || len(vs.Spec.Http) > 0 || vs.Annotations["hosts"] != "2" {
			whole++
		}
	}
	if n := guardDecodes.Load(); n != events {
		t.Errorf("the guard decoded %d objects for %d events", n, events)
	}
	if whole != 0 {
		t.Errorf("the client decoded %d whole objects, want none (only slim ones)", whole)
	}
}

// Slim sees watch events only: a list and a single object pass whole.
func TestSlimLeavesListsAndObjectsWhole(t *testing.T) {
	g := New(testScheme, Options{Slim: func(runtime.Object) runtime.Object {
		t.Error("Slim was called for a response that is no watch")
		return nil
	}})
	body := list("networking.istio.io/v1", "VirtualServiceList", virtualService("one", `["a.example"]`, "2"))
	resp := get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(body)), nil)),
		"https://api/apis/networking.istio.io/v1/virtualservices")
	if got := readAll(t, resp); got != body {
		t.Errorf("the list changed: %s", got)
	}
	one := virtualService("one", `["a.example"]`, "2")
	resp = get(t, g.Wrap(serve("application/json", http.StatusOK, io.NopCloser(strings.NewReader(one)), nil)),
		"https://api/apis/networking.istio.io/v1/namespaces/team-b/virtualservices/one")
	if got := readAll(t, resp); got != one {
		t.Errorf("the object changed: %s", got)
	}
}

// benchVirtualService is a VirtualService as the apirule controller writes
// one for an APIRule of eight rules, as JSON.
func benchVirtualService(b *testing.B) string {
	vs := &networkingv1.VirtualService{}
	vs.APIVersion, vs.Kind = "networking.istio.io/v1", "VirtualService"
	vs.Name, vs.Namespace, vs.UID, vs.ResourceVersion = "orders", "team-a", "uid-orders", "42"
	vs.Labels = map[string]string{"app.kubernetes.io/managed-by": "apirule-controller", "gateway.portico.dev/apirule": "orders"}
	vs.Spec.Hosts = []string{"orders.example.com"}
	vs.Spec.Gateways = []string{"istio-system/public"}
	for i := range 8 {
		vs.Spec.Http = append(vs.Spec.Http, &networkingapi.HTTPRoute{
			Name: fmt.Sprintf("rule-%d", i),
			Match: []*networkingapi.HTTPMatchRequest{{
				Uri:    &networkingapi.StringMatch{MatchType: &networkingapi.StringMatch_Prefix{Prefix: fmt.Sprintf("/api/v1/orders/%d/", i)}},
				Method: &networkingapi.StringMatch{MatchType: &networkingapi.StringMatch_Regex{Regex: "^(GET|POST|PUT)$"}},
			}},
			Route: []*networkingapi.HTTPRouteDestination{{Destination: &networkingapi.Destination{
				Host: "orders.team-a.svc.cluster.local", Port: &networkingapi.PortSelector{Number: 8080},
			}}},
			Headers: &networkingapi.Headers{Request: &networkingapi.Headers_HeaderOperations{
				Set: map[string]string{"x-forwarded-host": "orders.example.com"}, Remove: []string{"x-portico-user"},
			}},
		})
	}
	raw, err := encjson.Marshal(vs)
	if err != nil {
		b.Fatal(err)
	}
	return string(raw)
}

// BenchmarkWatchEventDecodes is one watch event of a VirtualService
// through the guard and client-go's decode of what the guard passes on:
// whole (no Slim: the object is decoded twice) and slimmed to metadata and
// the spec's hash (owned.Kind.Observe: decoded whole once). Compare the
// two in the same run.
func BenchmarkWatchEventDecodes(b *testing.B) {
	kind := owned.Proto("VirtualService", func(o *networkingv1.VirtualService) proto.Message { return &o.Spec },
		func(l *networkingv1.VirtualServiceList) []*networkingv1.VirtualService { return l.Items })
	observe := func(obj runtime.Object) runtime.Object {
		o, ok := obj.(*networkingv1.VirtualService)
		if !ok || !kind.Observe(o) {
			return nil
		}
		return o
	}
	ev := []byte(frame("MODIFIED", benchVirtualService(b)))
	codecs := serializer.NewCodecFactory(testScheme)
	client := codecs.UniversalDeserializer()
	for name, slim := range map[string]func(runtime.Object) runtime.Object{"whole": nil, "slim": observe} {
		g := New(testScheme, Options{Slim: slim})
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out := g.event(ev)
				var frame watchFrame
				if err := encjson.Unmarshal(out, &frame); err != nil {
					b.Fatal(err)
				}
				if _, _, err := client.Decode(frame.Object, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
