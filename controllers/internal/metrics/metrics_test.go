package metrics

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A refusal counts once, when the Ready reason goes to it: not again while
// it stays, and not for reasons that are no refusal.
func TestRefusedCountsTransitions(t *testing.T) {
	refusal := func(reason string) bool { return reason == "HostOccupied" || reason == "HostReserved" }
	steps := []struct {
		name          string
		before, after string
		want          float64 // HostOccupied refusals counted so far
	}{
		{"first status, refused", "", "HostOccupied", 1},
		{"refused again at the next reconcile", "HostOccupied", "HostOccupied", 1},
		{"freed", "HostOccupied", "Applied", 1},
		{"applied again", "Applied", "Applied", 1},
		{"a failure is no refusal", "Applied", "ApplyFailed", 1},
		{"refused again after being applied", "ApplyFailed", "HostOccupied", 2},
		{"another refusal", "HostOccupied", "HostReserved", 2},
	}
	g := NewWithT(t)
	const kind = "TestRefusedCountsTransitions"
	for _, s := range steps {
		Refused(kind, s.before, s.after, refusal)
		g.Expect(testutil.ToFloat64(refusals.WithLabelValues(kind, "HostOccupied"))).To(Equal(s.want), s.name)
	}
	g.Expect(testutil.ToFloat64(refusals.WithLabelValues(kind, "HostReserved"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(refusals.WithLabelValues(kind, "ApplyFailed"))).To(BeZero())
}

// Written counts by controller, kind and operation.
func TestWritten(t *testing.T) {
	g := NewWithT(t)
	const controller = "TestWritten"
	Written(controller, "VirtualService", Create)
	Written(controller, "VirtualService", Create)
	Written(controller, "VirtualService", Delete)
	g.Expect(testutil.ToFloat64(written.WithLabelValues(controller, "VirtualService", Create))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(written.WithLabelValues(controller, "VirtualService", Delete))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(written.WithLabelValues(controller, "VirtualService", Update))).To(BeZero())
}

// The series are registered in controller-runtime's registry under the
// names and labels the chart's alerts and dashboard use.
func TestRegistered(t *testing.T) {
	g := NewWithT(t)
	Written("TestRegistered", "Secret", Update)
	Refused("TestRegistered", "", "Refused", func(string) bool { return true })
	NewSpecToReady("TestRegistered").observer.Observe(1)
	n, err := testutil.GatherAndCount(ctrlRegistry(), "portico_objects_written_total", "portico_refusals_total", "portico_spec_to_ready_seconds")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically(">=", 3))
	g.Expect(testutil.GatherAndLint(ctrlRegistry(), "portico_objects_written_total", "portico_refusals_total", "portico_spec_to_ready_seconds")).To(BeEmpty())
}
