// Package signing signs and verifies Portico's OCI artifacts (controller and
// operator images, the OLM bundle image, multi-arch image indexes, Helm charts
// pushed as OCI artifacts) with a cosign key pair stored in files.
//
// # What is signed
//
// Every artifact is addressed by its manifest digest (a name.Digest), never by
// tag. The signed message is a "simple signing" payload
// (github.com/sigstore/sigstore/pkg/signature/payload) of the form
//
//	{"critical":{"identity":{"docker-reference":"<registry>/<repository>"},
//	             "image":{"docker-manifest-digest":"sha256:<hex>"},
//	             "type":"cosign container image signature"},
//	 "optional":null}
//
// For an image index the index digest itself is signed; the per-platform
// manifests it lists are not signed separately (like `cosign sign` without
// --recursive).
//
// # Format
//
// The format is exactly what `cosign sign --key cosign.key --tlog-upload=false`
// produces, so `cosign verify --key cosign.pub --insecure-ignore-tlog` accepts
// it and [Verify] accepts what cosign produced:
//
//   - the payload is stored as a layer of media type
//     application/vnd.dev.cosign.simplesigning.v1+json in an OCI image pushed to
//     the tag sha256-<hex>.sig of the artifact's own repository;
//   - the base64 signature (ECDSA P-256 over SHA-256 of the payload) is the
//     layer annotation dev.cosignproject.cosign/signature;
//   - signing again appends a layer to the existing .sig image (signatures from
//     other keys, e.g. CI's keyless ones, are kept), except that a signature
//     this key already made over the same payload is not appended twice.
//
// Key files are cosign's own: cosign.key is a PEM block "ENCRYPTED SIGSTORE
// PRIVATE KEY" (PKCS #8 encrypted with scrypt + NaCl secretbox under the
// password), cosign.pub a PEM "PUBLIC KEY" (PKIX). Keys made by
// `cosign generate-key-pair` work here and keys made by [GenerateKeyPair] work
// with the cosign CLI.
//
// Nothing is uploaded to a transparency log (Rekor) and no certificate is
// requested (Fulcio): signatures carry no bundle, so verification must skip
// the tlog check (IgnoreTlog, or --insecure-ignore-tlog on the CLI).
//
// # Why a key file locally and keyless in CI
//
// `make release` and the e2e tests run on developer machines and in
// air-gapped test environments where neither Rekor nor Fulcio nor an OIDC
// identity is reachable; a throwaway or developer-held key pair lets them sign
// and check every artifact fully offline, against plain-HTTP registries on
// 127.0.0.1. Published releases are signed in CI by the cosign CLI in keyless
// mode instead: the GitHub Actions OIDC identity gets a short-lived Fulcio
// certificate and the signature is recorded in Rekor, so users can verify with
// `cosign verify --certificate-identity ... --certificate-oidc-issuer ...`
// without Portico having to keep a long-lived private key secret. This package
// deliberately implements only the offline, key-file half.
package signing
