// Package publish builds and publishes one Portico release from the tree:
// one multi-platform image (an OCI image index) per binary with a CycloneDX
// SBOM attached to every platform image as an OCI referrer, the Helm chart
// with every image pinned by digest (an OCI chart pushed with the Helm SDK's
// registry client), the OLM bundle image, optional cosign signatures of every
// digest, and the files a GitHub release carries: install.yaml (the chart
// rendered for `kubectl apply`), NOTES.md (changes since the previous tag)
// and release.json (what was pushed, by digest: a Record).
//
// A release is reproducible: the same tree, VERSION and SOURCE_DATE_EPOCH
// give the same image, index, SBOM, chart and bundle digests. Every timestamp
// is the release's epoch (SOURCE_DATE_EPOCH, else the commit time of HEAD);
// binaries are built with -trimpath and fixed flags; archives have fixed
// modes, owners and times. Only signatures differ between two runs (ECDSA
// signatures are randomised), and they are separate artifacts.
package publish
