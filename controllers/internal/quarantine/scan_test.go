package quarantine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// crdList is a list as the API server serves custom resources: members
// sorted, so items come before kind.
func crdList(items ...string) string {
	return `{"apiVersion":"gateway.portico.dev/v1alpha1","items":[` + strings.Join(items, ",") +
		`],"kind":"APIRuleList","metadata":{"continue":"","resourceVersion":"10"}}` + "\n"
}

func TestListItemsAreCheckedOneByOne(t *testing.T) {
	good := func(i int) string { return apiRule(fmt.Sprintf("good-%d", i), `["a.example.com"]`, goodTime) }
	cases := []struct {
		name     string
		body     string
		items    []string
		noStatus []string
		reports  []string
	}{
		{name: "bad spec first", body: crdList(badSpecRule, good(1), good(2)),
			items: []string{"good-1", "good-2"}, reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "bad spec in the middle", body: crdList(good(1), badSpecRule, good(2)),
			items: []string{"good-1", "good-2"}, reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "bad spec last", body: crdList(good(1), good(2), badSpecRule),
			items: []string{"good-1", "good-2"}, reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "the only item is bad", body: crdList(badSpecRule), items: []string{},
			reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "bad status first, bad spec last", body: crdList(badStatusRule, good(1), badSpecRule),
			items: []string{"bad-status", "good-1"}, noStatus: []string{"bad-status"},
			reports: []string{"APIRule/bad-status:StatusRemoved", "APIRule/bad-spec:Dropped"}},
		{name: "bad status in the middle", body: crdList(good(1), badStatusRule, good(2)),
			items: []string{"good-1", "bad-status", "good-2"}, noStatus: []string{"bad-status"},
			reports: []string{"APIRule/bad-status:StatusRemoved"}},
		{name: "built-in order, spaces between items",
			body:  list("gateway.portico.dev/v1alpha1", "APIRuleList", good(1), " "+badSpecRule+" ", "\n"+good(2)),
			items: []string{"good-1", "good-2"}, reports: []string{"APIRule/bad-spec:Dropped"}},
	}
	f := newFilter(testScheme)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, reports := f.document([]byte(tc.body))
			if got := reasons(reports); fmt.Sprint(got) != fmt.Sprint(tc.reports) {
				t.Errorf("reports %v, want %v", got, tc.reports)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON:\n%s", out)
			}
			var members, in map[string]json.RawMessage
			_ = json.Unmarshal([]byte(tc.body), &in)
			if err := json.Unmarshal(out, &members); err != nil || !bytes.Equal(members["metadata"], in["metadata"]) {
				t.Errorf("list members changed: %s", out)
			}
			obj := typedDecode(t, out)
			checkObjects(t, obj, tc.items, tc.noStatus)
			if len(tc.items) == 0 && strings.Contains(string(out), "bad-spec") {
				t.Errorf("kept: %s", out)
			}
		})
	}
}

func TestAGoodListIsCheckedWithoutACopy(t *testing.T) {
	const n = 10000
	items := make([]string, n)
	for i := range items {
		items[i] = apiRule(fmt.Sprintf("r%d", i), `["a.example.com"]`, goodTime)
	}
	body := []byte(crdList(items...))

	// Measure the live heap at every 1000th item, after a collection, above
	// what was live before the walk (the body included).
	f := newFilter(testScheme)
	var before, peak uint64
	checked := 0
	check := f.checkItem
	f.checkItem = func(item []byte, gvk schema.GroupVersionKind) error {
		if checked++; checked%1000 == 0 {
			// One reading: two could differ, and the difference of
			// unsigned numbers must not wrap.
			if live := heapLive(); live > before {
				peak = max(peak, live-before)
			}
		}
		return check(item, gvk)
	}
	before = heapLive()
	out, reports := f.document(body)
	if len(reports) != 0 || &out[0] != &body[0] || len(out) != len(body) {
		t.Fatalf("a good list was not passed on as it came: %d reports", len(reports))
	}
	if checked != n {
		t.Fatalf("checked %d items, want %d", checked, n)
	}
	t.Logf("held %d bytes beyond a body of %d", peak, len(body))
	// The whole-list decode this replaces holds several times the body.
	if ratio := float64(peak) / float64(len(body)); ratio > 0.05 {
		t.Errorf("held %d bytes beyond a body of %d during the walk (%.3f of it), want < 0.05", peak, len(body), ratio)
	}
}

func heapLive() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestFramesInOtherShapesTakeTheFullPath(t *testing.T) {
	// Shapes the API server does not write: each must end as the client's
	// decoders read it (case-sensitive members, the last duplicate wins;
	// the kind as encoding/json reads it).
	badObjectFirst := `{"object":` + badSpecRule + `,"type":"ADDED"}`
	kindLast := `{"metadata":{"name":"odd","namespace":"team-a","uid":"uid-odd","resourceVersion":"3"},` +
		`"spec":{"hosts":["odd.example.com"],"gateway":"istio-system/public"},` +
		`"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule"}`
	withBadSpec := strings.Replace(kindLast, `["odd.example.com"]`, `5`, 1)
	cases := []struct {
		name      string
		frame     string
		unchanged bool
		reports   []string
	}{
		{name: "object before type, bad", frame: badObjectFirst, reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "object before type, good", frame: `{"object":` + goodRule + `,"type":"MODIFIED"}`, unchanged: true},
		{name: "kind last, good", frame: frame("ADDED", kindLast), unchanged: true},
		{name: "kind last, bad", frame: frame("ADDED", withBadSpec), reports: []string{"APIRule/odd:Dropped"}},
		{name: "spaces", frame: `{ "type" : "ADDED" , "object" : ` + badSpecRule + ` }`, reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "duplicate type: the last wins", frame: `{"type":"BOOKMARK","object":` + badSpecRule + `,"type":"ADDED"}`,
			reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "duplicate object: the last wins", frame: `{"type":"ADDED","object":` + goodRule + `,"object":` + badSpecRule + `}`,
			reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "type in another case is not the type", frame: `{"type":"ADDED","object":` + badSpecRule + `,"Type":"BOOKMARK"}`,
			reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "duplicate kind: the last wins",
			frame:   frame("ADDED", strings.Replace(badSpecRule, `"kind":"APIRule"`, `"kind":"Status"`, 1)[:len(badSpecRule)-2]+`,"kind":"APIRule"}`),
			reports: []string{"APIRule/bad-spec:Dropped"}},
		{name: "escaped type", frame: `{"type":"\u0041DDED","object":` + badSpecRule + `}`, reports: []string{"APIRule/bad-spec:Dropped"}},
	}
	f := newFilter(testScheme)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if f.goodEvent([]byte(tc.frame)) && !tc.unchanged {
				t.Errorf("taken for a good event")
			}
			out, reports := f.event([]byte(tc.frame))
			if got := reasons(reports); fmt.Sprint(got) != fmt.Sprint(orEmpty(tc.reports)) {
				t.Errorf("reports %v, want %v", got, tc.reports)
			}
			if unchanged := string(out) == tc.frame; unchanged != tc.unchanged {
				t.Errorf("unchanged %v, want %v: %s", unchanged, tc.unchanged, out)
			}
		})
	}
}

func TestListsInOtherShapesTakeTheFullPath(t *testing.T) {
	cases := map[string]string{
		"duplicate items":         `{"apiVersion":"gateway.portico.dev/v1alpha1","items":[],"kind":"APIRuleList","items":[` + badSpecRule + `]}`,
		"items in another case":   `{"apiVersion":"gateway.portico.dev/v1alpha1","Items":[],"kind":"APIRuleList","items":[` + badSpecRule + `]}`,
		"kind in another case":    `{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"Status","items":[` + badSpecRule + `],"KIND":"APIRuleList"}`,
		"escaped key":             `{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"Status","items":[` + badSpecRule + `],"\u006bind":"APIRuleList"}`,
		"kind after a bad list":   `{"items":[` + badSpecRule + `],"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRuleList"}`,
		"duplicate kind, reverse": `{"kind":"Status","apiVersion":"gateway.portico.dev/v1alpha1","items":[` + badSpecRule + `],"kind":"APIRuleList"}`,
	}
	f := newFilter(testScheme)
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			out, reports := f.document([]byte(body))
			if got := reasons(reports); fmt.Sprint(got) != "[APIRule/bad-spec:Dropped]" {
				t.Errorf("reports %v", got)
			}
			if bytes.Contains(out, []byte(`"hosts":5`)) {
				t.Errorf("the bad item was passed on: %s", out)
			}
		})
	}
}

// FuzzSniffing checks the cheap reading of watch frames against the full
// one: a frame it takes for good passes the full path unchanged too.
func FuzzSniffing(f *testing.F) {
	for _, obj := range []string{goodRule, badStatusRule, badSpecRule, goodGateway, badVirtualSvc, goodVirtualSvc} {
		for _, typ := range []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK"} {
			f.Add([]byte(frame(typ, obj)))
		}
	}
	f.Add([]byte(`{"type":"ADDED","object":` + goodRule + `,"type":"BOOKMARK"}`))
	filter := newFilter(testScheme)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if !filter.goodEvent(frame) {
			return
		}
		if out, reports := filter.eventByUnmarshal(frame); !bytes.Equal(out, frame) || len(reports) != 0 {
			t.Errorf("sniffed as good, but the full path gives %s, %v", out, reasons(reports))
		}
	})
}

func TestSniffKind(t *testing.T) {
	cases := map[string]bool{
		`{"kind":"APIRule","apiVersion":"gateway.portico.dev/v1alpha1","metadata":{}}`: true,
		`{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule","metadata":{}}`: true,
		`{"kind":"APIRule","kind":"APIRule","metadata":{}}`:                            false,
		`{"kind":"APIRule","metadata":{},"apiVersion":"gateway.portico.dev/v1alpha1"}`: false,
		`{"kind":"API\"Rule","apiVersion":"gateway.portico.dev/v1alpha1","m":1}`:       false,
		`{"kind":"","apiVersion":"gateway.portico.dev/v1alpha1","metadata":{}}`:        false,
		`{"kind":"APIRule","apiVersion":"a/b/c","metadata":{}}`:                        false,
		`{"kind":"APIRule","apiVersion":"gateway.portico.dev/v1alpha1"}`:               false,
	}
	want := schema.GroupVersionKind{Group: "gateway.portico.dev", Version: "v1alpha1", Kind: "APIRule"}
	for obj, sniffed := range cases {
		gvk, ok := sniffKind([]byte(obj))
		if ok != sniffed || (ok && gvk != want) {
			t.Errorf("%s: %v %v", obj, gvk, ok)
		}
	}
}
