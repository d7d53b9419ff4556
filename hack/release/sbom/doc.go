// Package sbom makes a Software Bill of Materials (SBOM) for each of
// Portico's release images and attaches it to the image in its registry.
//
// # What the SBOM describes
//
// Each Portico image carries one Go binary. [FromBinary] reads the build
// information the Go linker embeds in that binary (debug/buildinfo) and turns
// it into a CycloneDX 1.6 JSON document, built with
// github.com/CycloneDX/cyclonedx-go:
//
//   - metadata.component is the application: type "application", name =
//     the image name (Subject.Name), version = the release version
//     (Subject.Version; the build info's own main-module version is "(devel)"
//     for local builds and is only kept as a property), purl
//     pkg:golang/<main module path>@<release version>#<main package subpath>,
//     e.g. pkg:golang/github.com/portico-dev/portico@v0.1.0#cmd/operator.
//     pkg:golang is what Go SBOM tools (cyclonedx-gomod, syft, trivy) use for
//     the main module; pkg:oci is not used because its version must be the
//     image's manifest digest, which is not known when the SBOM is made.
//   - metadata.component.properties record how the binary was built:
//     cdx:gomod:build:env:GOVERSION, …:GOOS, …:GOARCH, …:CGO_ENABLED and one
//     cdx:gomod:build:tag per build tag (the official CycloneDX cdx:gomod
//     taxonomy), every other build setting verbatim as
//     portico:go:build:setting:<key> (-ldflags, -trimpath, -buildmode,
//     GOAMD64, vcs.revision, vcs.time, vcs.modified, …; note that the go
//     command does not record -ldflags when -trimpath is set, as in Portico's
//     release builds, see go.dev/issue/52372), the main package path
//     (portico:go:package), the image platform (portico:image:platform) and a
//     real main-module version from the build info if there is one
//     (portico:go:module:version).
//   - metadata.tools lists the generator: portico-release and cyclonedx-go.
//   - metadata.timestamp is Subject.Created (the release's SOURCE_DATE_EPOCH),
//     never the current time; metadata.lifecycles is "post-build".
//   - components holds every module linked into the binary: type "library",
//     name = module path, version = module version, purl
//     pkg:golang/<module path>@<version> (path segments and version
//     percent-encoded as the purl spec requires, so v1.0.0+incompatible is
//     written v1.0.0%2Bincompatible), bom-ref = the purl. The go.sum hash
//     ("h1:…") is kept as the property portico:go:module:sum and not as a
//     CycloneDX hash: h1 is a SHA-256 of a listing of the module's file hashes,
//     not of any artifact a consumer could hash and compare, and CycloneDX
//     hashes must be hex digests of the component itself.
//   - A replaced module (a replace directive) is listed under its replacement:
//     name, version, purl and sum of the replacement, plus the property
//     portico:go:module:replaces = <original path>@<original version>. A module
//     replaced by a local directory has no version and no purl (nothing
//     published identifies that code): it is listed under its original module
//     path with bom-ref "gomod-local:<original path>" and the property
//     portico:go:module:replace-dir = <directory>.
//   - The Go standard library is one more component, name "stdlib", version
//     the toolchain's (e.g. go1.26.8), purl pkg:golang/stdlib@1.26.8 (the
//     spelling syft uses and vulnerability scanners match on), because the
//     standard library is compiled into every binary and is where most Go
//     vulnerabilities are found.
//   - dependencies has a single entry: the application depends on every
//     component. Build info records which modules are linked in but not which
//     module imports which, so no edges between modules are given (absent
//     entries mean "unknown" in CycloneDX, not "no dependencies").
//
// Components and properties are sorted and the serialNumber is a UUIDv5
// derived from the SHA-256 of the rest of the document, so the same binary and
// [Subject] always give the same bytes. The only other input is the version of
// cyclonedx-go named in metadata.tools, which is fixed by Portico's go.mod.
//
// # How it is attached
//
// [Attach] pushes the SBOM as an OCI 1.1 referrer of an image's platform
// manifest, the way `oras attach --artifact-type application/vnd.cyclonedx+json`
// does: an OCI image manifest with
//
//   - artifactType application/vnd.cyclonedx+json ([ArtifactType]),
//   - config the OCI empty descriptor (application/vnd.oci.empty.v1+json,
//     content "{}"),
//   - one layer, the SBOM, of media type application/vnd.cyclonedx+json,
//   - subject the image's platform manifest.
//
// The referrer manifest has no timestamp, so attaching the same SBOM again
// gives the same digest and does not add a second referrer. Registries that
// implement the referrers API index the manifest themselves; for the others
// go-containerregistry maintains the OCI fallback tag sha256-<subject hex>, an
// image index listing the referrers.
//
// [Find] lists the subject's referrers (referrers API, or the fallback tag) and
// returns the content of the SBOM layers of those that are CycloneDX SBOMs.
package sbom
