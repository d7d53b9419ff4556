package monitoring

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// histogramSuffixes are the series a histogram (or summary) named name is
// exported as besides name itself.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// MetricNames parses expr with Prometheus's PromQL parser and returns the
// metric names its selectors read, sorted and without duplicates. A selector
// without a metric name (`{job="x"}`, a regular expression on __name__) is an
// error: what it reads cannot be checked.
func MetricNames(p parser.Parser, expr string) ([]string, error) {
	node, err := p.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var names []string
	var errs []error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			errs = append(errs, fmt.Errorf("%q: the selector %s names no metric", expr, vs))
			return nil
		}
		names = append(names, vs.Name)
		return nil
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Documented reports whether the series name is a documented metric: the
// metric itself or one of a histogram's _bucket, _sum and _count series.
func Documented(name string, documented map[string]bool) bool {
	if documented[name] {
		return true
	}
	for _, suffix := range histogramSuffixes {
		if base, ok := strings.CutSuffix(name, suffix); ok && documented[base] {
			return true
		}
	}
	return false
}

// Unscoped parses expr and returns what in it may read or mix in series
// outside the namespace ns: each selector without the matcher
// namespace="ns", and, when keepLabel, each aggregation that drops the
// namespace label (sum(...), by without it, without(namespace)) so that the
// alert no longer says whose series fired it. A tenant can expose series of
// Portico's names from its own namespace; only the namespace label, which
// prometheus-operator sets from the scraped pod, tells them apart.
func Unscoped(p parser.Parser, expr, ns string, keepLabel bool) ([]string, error) {
	node, err := p.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var out []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if !slices.ContainsFunc(n.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == namespaceLabel && m.Type == labels.MatchEqual && m.Value == ns
			}) {
				out = append(out, n.String())
			}
		case *parser.AggregateExpr:
			if keepLabel && slices.Contains(n.Grouping, namespaceLabel) == n.Without {
				out = append(out, n.String())
			}
		}
		return nil
	})
	return out, nil
}

// namespaceLabel is the label prometheus-operator gives every target the
// namespace of its pod or Service.
const namespaceLabel = "namespace"
