// Package helmchart renders, packages and pushes Portico's Helm chart
// (charts/portico) with the Helm SDK: the chart of a release with every
// image pinned by digest (reproducible archive), the templates rendered as
// `helm template` would (the OLM bundle and install.yaml are made of them),
// and the controllers the chart deploys.
package helmchart
