package testenv

import (
	"fmt"

	"github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Sample scrapes controller-runtime's registry, where the controllers
// register their series, and returns the value of the series name whose
// labels include labels: a counter's or gauge's value, a histogram's count
// of observations. Several matching series add up; none is 0.
func Sample(name string, labels map[string]string) (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather: %w", err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return SumSamples(f, labels), nil
		}
	}
	return 0, nil
}

// SampleOf is Sample inside a Gomega assertion (an Eventually's g, or a
// test's): a failed scrape fails it.
func SampleOf(g gomega.Gomega, name string, labels map[string]string) float64 {
	v, err := Sample(name, labels)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return v
}

// SumSamples adds up the values of the samples of family that carry every
// label of want (nil: all of them). A scrape of the registry here and one of
// a process's /metrics (test/perf) read their series alike.
func SumSamples(family *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
	for _, m := range family.GetMetric() {
		if hasLabels(m, want) {
			sum += SampleValue(m)
		}
	}
	return sum
}

// SampleValue is a sample's value: a counter's, gauge's or untyped metric's,
// or the count of observations of a histogram or summary.
func SampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	}
	return 0
}

// hasLabels reports whether the sample carries every label of want.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// ExpectByReady expects the gauge name, which counts objects by their Ready
// condition (labels ready and reason: portico_apirules, portico_ratelimits),
// to count exactly objects, the ready and reason of every object the API
// server holds, and objects to hold each of present at least once (the
// states the test made).
func ExpectByReady(g gomega.Gomega, name string, objects [][2]string, present ...[2]string) {
	want := map[[2]string]float64{}
	for _, labels := range objects {
		want[labels]++
	}
	for _, labels := range present {
		g.Expect(want).To(gomega.HaveKey(labels), "no object is %v", labels)
	}
	for labels, n := range want {
		g.Expect(SampleOf(g, name, map[string]string{"ready": labels[0], "reason": labels[1]})).To(gomega.Equal(n), "%s%v", name, labels)
	}
	g.Expect(SampleOf(g, name, nil)).To(gomega.BeNumerically("==", len(objects)), "%s in all", name)
}
