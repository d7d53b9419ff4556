// Package bundle generates Portico's OLM bundle (registry+v1) from the same
// manifests a Helm user gets: it renders charts/portico with the Helm SDK
// (release portico in portico-system, images pointed at the bundle's
// version) and turns what the chart renders into
//
//   - manifests/portico.clusterserviceversion.yaml: the operator Deployment
//     as the install strategy, with a RELATED_IMAGE_* variable for every
//     controller image; the RBAC of the operator and of every controller as
//     clusterPermissions and permissions of their ServiceAccounts (the
//     operator's Role in namespace default as clusterPermissions: OLM puts
//     a bundle's Roles in the install namespace); every
//     image in relatedImages; the CRDs as owned CRDs; config/samples as the
//     alm-examples annotation;
//   - manifests/<group>_<plural>.yaml: the CRDs of config/crd/bases, byte
//     for byte;
//   - manifests/<name>_<group>_<version>_<kind>.yaml: the other objects the
//     chart renders that a bundle carries (the metrics Service);
//   - metadata/annotations.yaml, and the bundle's Dockerfile.
//
// A bundle owns its manifests/ and metadata/ directories: Write removes
// files there that it no longer produces. The output depends only on the
// chart, config/ and the Options (no timestamps), so generating twice
// changes nothing. hack/release/cmd/bundle is its command line (make bundle).
//
// The version is the operator's as the images are tagged (a leading v is
// fine); the bundle's version is its semver without the v. A version that is
// not semver, such as `git describe` of an untagged commit, gives the bundle
// version DevVersion. Without one, the chart's appVersion is used: the
// bundle checked in under bundle/ is generated that way.
package bundle
