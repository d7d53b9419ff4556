// Package monitoring proves the chart's monitoring assets against Prometheus
// itself: the alerts of charts/portico/files/monitoring/rules.yaml load with
// Prometheus's rule loader and pass their unit tests in promtool (built from
// the github.com/prometheus/prometheus module this module pins), and every
// PromQL expression of the rules and of the Grafana dashboard parses with
// Prometheus's PromQL parser and names only metrics docs/operations.md
// documents (which docs/facts_test.go holds to the code) and reads only
// the series of Portico's namespace, portico-system, which the chart
// replaces with the release namespace (docs/threat-model.md, section 8).
//
// It is a module of its own so that the Prometheus module's dependency graph
// never reaches the product's go.mod. It reads the chart and the docs; it
// changes nothing and imports nothing of the product.
package monitoring
