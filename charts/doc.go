// Package charts holds Portico's Helm chart, charts/portico, and its tests.
// The tests render the chart with the Helm SDK, the way helm install and
// helm template do, check every value the chart offers, the schema's
// rejections and helm lint, and compare the chart's CRDs and RBAC with what
// controller-gen writes into config/, so the chart cannot drift from the
// code. The package has no code of its own: the chart's generated parts are
// written by hack/chartsync (make manifests).
package charts
