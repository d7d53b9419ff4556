package signing

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	signatureoptions "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// File names written by GenerateKeyPair, the same as `cosign generate-key-pair`.
const (
	PrivateKeyFile = "cosign.key"
	PublicKeyFile  = "cosign.pub"
)

// GenerateKeyPair writes cosign.key (encrypted with password, cosign's format)
// and cosign.pub into dir and returns their paths.
//
// The key is ECDSA P-256, as with `cosign generate-key-pair`. dir is created
// if needed. Existing key files are never overwritten: if either file already
// exists GenerateKeyPair fails and leaves both untouched. An empty password is
// allowed (cosign accepts it too) but the key is then only obfuscated.
func GenerateKeyPair(dir string, password []byte) (privateKey, publicKey string, err error) {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return "", "", fmt.Errorf("generating cosign key pair: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("creating key directory: %w", err)
	}
	privateKey = filepath.Join(dir, PrivateKeyFile)
	publicKey = filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privateKey, publicKey} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("refusing to overwrite existing key file %s", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
	}
	if err := writeNew(privateKey, keys.PrivateBytes, 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(publicKey, keys.PublicBytes, 0o644); err != nil {
		_ = os.Remove(privateKey)
		return "", "", err
	}
	return privateKey, publicKey, nil
}

// writeNew creates path (failing if it exists) and writes data to it.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Sign signs every digest with the private key file and pushes each signature
// to its repository (tag sha256-<hex>.sig), adding to signatures already
// there (idempotent: signing the same digest twice with the same key must not
// fail).
//
// Each digest must exist in its registry: signing a digest nobody pushed is
// almost certainly a release bug, so Sign refuses it (cosign's CLI would sign
// it anyway). Signing stops at the first failure; signatures pushed for
// earlier digests stay.
//
// opts are passed to every registry call. When none are given, credentials
// come from authn.DefaultKeychain (~/.docker/config.json) as with the cosign
// CLI; when some are given they replace that default, so pass
// remote.WithAuthFromKeychain or remote.WithAuth yourself if the registry
// needs credentials.
func Sign(ctx context.Context, privateKey string, password []byte, digests []name.Digest, opts ...remote.Option) error {
	if len(digests) == 0 {
		return errors.New("signing: no digests given")
	}
	sv, err := loadSigner(privateKey, password)
	if err != nil {
		return err
	}
	ropts := remoteOptions(ctx, opts)
	for _, d := range digests {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := signDigest(ctx, sv, d, ropts); err != nil {
			return fmt.Errorf("signing %s: %w", d, err)
		}
	}
	return nil
}

func loadSigner(privateKey string, password []byte) (signature.SignerVerifier, error) {
	pem, err := os.ReadFile(filepath.Clean(privateKey))
	if err != nil {
		return nil, fmt.Errorf("reading private key: %w", err)
	}
	// nil load options: cosign's defaults (only matter for ed25519 keys).
	sv, err := cosign.LoadPrivateKey(pem, password, nil)
	if err != nil {
		return nil, fmt.Errorf("loading private key %s: %w", privateKey, err)
	}
	return sv, nil
}

func signDigest(ctx context.Context, sv signature.SignerVerifier, d name.Digest, ropts []remote.Option) error {
	if err := checkExists(d, ropts); err != nil {
		return err
	}
	ociOpts := []ociremote.Option{ociremote.WithRemoteOptions(ropts...)}

	// The same payload `cosign sign` produces without -a annotations.
	pl, err := (&payload.Cosign{Image: d}).MarshalJSON()
	if err != nil {
		return fmt.Errorf("building payload: %w", err)
	}
	raw, err := sv.SignMessage(bytes.NewReader(pl), signatureoptions.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("signing payload: %w", err)
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return err
	}

	// SignedUnknown only needs the digest: its Signatures() reads the
	// existing sha256-<hex>.sig image (or an empty one), whatever kind of
	// manifest the digest is.
	se := ociremote.SignedUnknown(d, ociOpts...)
	// The dupe detector drops the new layer when the .sig image already holds
	// the same payload with a signature this key verifies; ECDSA signatures
	// are randomised, so without it every run would append a new layer.
	signed, err := mutate.AttachSignatureToEntity(se, sig, mutate.WithDupeDetector(cremote.NewDupeDetector(sv)))
	if err != nil {
		return err
	}
	if err := ociremote.WriteSignatures(d.Repository, signed, ociOpts...); err != nil {
		return fmt.Errorf("pushing signature: %w", err)
	}
	return nil
}

// checkExists fails if the registry does not know d.
func checkExists(d name.Digest, ropts []remote.Option) error {
	_, err := remote.Head(d, ropts...)
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return fmt.Errorf("artifact not found in registry: %w", err)
	}
	if err != nil {
		return fmt.Errorf("looking up artifact: %w", err)
	}
	return nil
}

// Verify checks that every digest carries at least one signature valid for
// the public key file, and that the signed payload names that very digest;
// the error names the first digest that fails and why.
//
// This is `cosign verify --key <publicKey> --insecure-ignore-tlog` for each
// digest: no transparency log or certificate checks, signatures by other keys
// (e.g. CI's keyless ones) are ignored, and the payload's docker-reference is
// not compared with the repository (cosign does not either), so a signed
// artifact may be copied to another registry. opts are handled as in Sign.
func Verify(ctx context.Context, publicKey string, digests []name.Digest, opts ...remote.Option) error {
	if len(digests) == 0 {
		return errors.New("verifying signatures: no digests given")
	}
	verifier, err := loadVerifier(publicKey)
	if err != nil {
		return err
	}
	co := &cosign.CheckOpts{
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remoteOptions(ctx, opts)...)},
		SigVerifier:        verifier,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		// Without a ClaimVerifier cosign only checks the signature over the
		// payload, so a .sig image copied from another digest would pass.
		ClaimVerifier: cosign.SimpleClaimVerifier,
	}
	for _, d := range digests {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, _, err := cosign.VerifyImageSignatures(ctx, d, co); err != nil {
			var none *cosign.ErrNoSignaturesFound
			if errors.As(err, &none) {
				tag, _ := ociremote.SignatureTag(d, co.RegistryClientOpts...)
				return fmt.Errorf("verifying %s: not signed (no signatures at %s): %w", d, tag, err)
			}
			return fmt.Errorf("verifying %s: %w", d, err)
		}
	}
	return nil
}

// loadVerifier reads a PEM public key the way `cosign verify --key file` does.
func loadVerifier(publicKey string) (signature.Verifier, error) {
	pem, err := os.ReadFile(filepath.Clean(publicKey))
	if err != nil {
		return nil, fmt.Errorf("reading public key: %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("parsing public key %s: %w", publicKey, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading public key %s: %w", publicKey, err)
	}
	return v, nil
}

// remoteOptions returns the go-containerregistry options for every call:
// the context first (so a caller's own remote.WithContext still wins), then
// either the caller's options or, when there are none, cosign's default
// keychain. (Mixing the keychain with a caller's remote.WithAuth would make
// go-containerregistry reject the options.)
func remoteOptions(ctx context.Context, opts []remote.Option) []remote.Option {
	ropts := []remote.Option{remote.WithContext(ctx)}
	if len(opts) == 0 {
		return append(ropts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	return append(ropts, opts...)
}
