// Package bundle generates Portico's OLM bundle (registry+v1) from the same
// manifests a Helm user gets: it renders charts/portico with the Helm SDK
// (release portico in portico-system, images pointed at the bundle's
// version) and turns what the chart renders into
//
//   - manifests/portico.clusterserviceversion.yaml: the operator Deployment
//     as the install strategy, with a RELATED_IMAGE_* variable for every
//     controller image; the cluster-wide RBAC of the operator and of every
//     controller as clusterPermissions of their ServiceAccounts (with the
//     rules of the operator's Role in namespace default, the API server's
//     EndpointSlice, since OLM puts a bundle's namespaced objects in the
//     install namespace; and an entry without rules for a ServiceAccount with
//     namespaced rules only, so that OLM creates it); no namespaced
//     permissions; every image in relatedImages; the CRDs as owned CRDs;
//     config/samples as the alm-examples annotation; the install modes
//     OwnNamespace and AllNamespaces;
//   - manifests/<group>_<plural>.yaml: the CRDs of config/crd/bases, with
//     the annotation helm.sh/resource-policy: keep added, so that OLM v1
//     keeps them (and every APIRule) when its ClusterExtension is deleted;
//   - manifests/<name>_rbac.authorization.k8s.io_v1_<role|rolebinding>.yaml:
//     the chart's Roles and RoleBindings of the release namespace, whose
//     subjects name no namespace (the RoleBinding's own): both OLMs create
//     them in the install namespace in every install mode, where
//     permissions would become cluster-wide rules in AllNamespaces mode;
//   - manifests/<name>_<group>_<version>_<kind>.yaml: the other objects the
//     chart renders that a bundle carries (the metrics Service). The chart
//     is rendered with networkPolicy.byOperator (the operator writes its own
//     NetworkPolicy; operator-controller v1.2.0 refuses a bundle holding one)
//     and without the dashboard ConfigMap (operator-controller renders every
//     object as a Helm template; no file of the bundle may hold "{{");
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
