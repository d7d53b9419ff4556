package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a Prometheus endpoint, by metric family name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses the Prometheus text exposition format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return Metrics(families), nil
}

// ScrapeMetrics reads the metrics at url in the text format.
func ScrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	// Not compressed: a benchmark scrapes often, and the process measured
	// would spend its CPU time on gzip.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// value is a sample's value: a counter's, gauge's or untyped metric's, or
// the sample count of a histogram or summary.
func value(m *dto.Metric) float64 {
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

// matches reports whether the sample carries every label of want.
func matches(m *dto.Metric, want map[string]string) bool {
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

// Has reports whether the scrape holds the metric family name.
func (m Metrics) Has(name string) bool {
	_, ok := m[name]
	return ok
}

// Sum adds up the samples of name that carry every label of want (nil:
// all of them).
func (m Metrics) Sum(name string, want map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		if matches(s, want) {
			sum += value(s)
		}
	}
	return sum
}

// ByLabel adds up the samples of name by the value of one label.
func (m Metrics) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m[name].GetMetric() {
		key := ""
		for _, l := range s.GetLabel() {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		out[key] += value(s)
	}
	return out
}

// HistogramTotals adds up the sample counts and sums of the histogram name.
func (m Metrics) HistogramTotals(name string) (count uint64, sum float64) {
	for _, s := range m[name].GetMetric() {
		count += s.GetHistogram().GetSampleCount()
		sum += s.GetHistogram().GetSampleSum()
	}
	return count, sum
}
