package quarantine

import (
	"fmt"
	"strings"
	"testing"
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
