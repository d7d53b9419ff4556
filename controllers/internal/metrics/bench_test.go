package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// BenchmarkSpecToReady is the cost a watch event (Saw) and a Ready status
// write (Ready) add, with 10,000 objects being timed.
func BenchmarkSpecToReady(b *testing.B) {
	s := NewSpecToReady("Benchmark")
	uids := make([]types.UID, 10_000)
	for i := range uids {
		uids[i] = types.UID(fmt.Sprintf("uid-%05d", i))
		s.Saw(uids[i], 1, false)
	}
	b.Run("event of a generation seen", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Saw(uids[i%len(uids)], 1, false)
		}
	})
	b.Run("new generation then Ready", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			uid := uids[i%len(uids)]
			s.Saw(uid, int64(i+2), false)
			s.Ready(uid, int64(i+2))
		}
	})
}

// BenchmarkReadyGaugeCollect is one scrape of portico_apirules over 10,000
// cached APIRules.
func BenchmarkReadyGaugeCollect(b *testing.B) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	reasons := []string{"Applied", "HostOccupied", "ServiceNotFound"}
	for i := range 10_000 {
		status := metav1.ConditionFalse
		if i%10 != 0 {
			status = metav1.ConditionTrue
		}
		r := apiRule(fmt.Sprintf("api-%05d", i), status, reasons[i%len(reasons)])
		r.Namespace = fmt.Sprintf("tenant-%03d", i%500)
		if err := store.Add(r); err != nil {
			b.Fatal(err)
		}
	}
	scheme := testScheme(b)
	gauge := newTestReadyGauge()
	gauge.live.Store(&Workers{Cache: &fakeCache{store: store}, Scheme: scheme})
	ch := make(chan prometheus.Metric, 100)
	b.ReportAllocs()
	for b.Loop() {
		gauge.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
}
