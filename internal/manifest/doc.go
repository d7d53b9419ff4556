// Package manifest reads and writes Kubernetes manifests as the project's
// generators (hack/release/cmd/bundle, hack/chartsync) and the release handle
// them, and as the tests read them (through test/testenv).
//
// One meaning per word: in Portico a "manifest" is a file of Kubernetes
// objects (YAML). An OCI image or index manifest is only ever named so
// inside package oci and go-containerregistry's API, and what a release
// pushed (release.json) is a publish.Record.
//
//   - Documents and Objects read a multi-document YAML stream: the
//     repository's one YAML stream reader;
//   - ReadTree reads the files below some directories, and WriteTree makes
//     directories a generator owns hold exactly what it generated, touching
//     only the files whose content changes.
package manifest
