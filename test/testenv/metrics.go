package testenv

import (
	"fmt"

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
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				sum += value(m)
			}
		}
	}
	return sum, nil
}

func matches(m *dto.Metric, labels map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		want, ok := labels[l.GetName()]
		if !ok {
			continue
		}
		if want != l.GetValue() {
			return false
		}
		found++
	}
	return found == len(labels)
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
