package reconciler_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/reconciler"
)

// The write counters exist at zero before any write, for every label value
// they can take: a first failure is then an increase, and the alerts and
// the dashboard that read them find their series.
func TestWriteCountersStartAtZero(t *testing.T) {
	g := NewWithT(t)
	m := reconciler.NewMetrics(prometheus.NewRegistry())
	g.Expect(testutil.CollectAndCount(m.Writes)).To(Equal(3))
	for _, op := range []string{"apply", "delete", "status"} {
		g.Expect(testutil.ToFloat64(m.Writes.WithLabelValues(op))).To(BeZero(), op)
	}
	g.Expect(testutil.CollectAndCount(m.Errors)).To(Equal(1 + 2*len(contract.Controllers)))
	g.Expect(testutil.ToFloat64(m.Errors.WithLabelValues("", "status"))).To(BeZero())
	for _, c := range contract.Controllers {
		for _, op := range []string{"apply", "delete"} {
			g.Expect(testutil.ToFloat64(m.Errors.WithLabelValues(string(c.Name), op))).To(BeZero(), "%s %s", c.Name, op)
		}
	}
}
