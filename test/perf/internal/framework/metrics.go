package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/portico-dev/portico/test/testenv"
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

// Has reports whether the scrape holds the metric family name.
func (m Metrics) Has(name string) bool {
	_, ok := m[name]
	return ok
}

// Sum adds up the samples of name that carry every label of want (nil:
// all of them).
func (m Metrics) Sum(name string, want map[string]string) float64 {
	return testenv.SumSamples(m[name], want)
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
		out[key] += testenv.SampleValue(s)
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
