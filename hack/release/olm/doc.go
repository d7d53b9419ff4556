// Package olm is what Portico ships for Operator Lifecycle Manager beside
// the bundle itself (package bundle generates it, hack/release/cmd/bundle writes bundle/):
//
//   - ValidateBundle checks a bundle directory with operator-framework's own
//     validators: the default set `operator-sdk bundle validate` runs and its
//     operatorframework optional suite;
//   - RenderBundle and Catalog make the file-based catalog (FBC) of the
//     portico package from released bundle images, one channel whose
//     entries upgrade each version to the next, validated as `opm validate`
//     does;
//   - CatalogImage and PublishCatalog put that catalog into an image served
//     by opm (`opm serve /configs`), the image a CatalogSource names.
package olm
