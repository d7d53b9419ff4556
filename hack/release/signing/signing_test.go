package signing

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Key pairs are generated once: cosign encrypts keys with scrypt, which
// costs tens of milliseconds per key.
var (
	keyA, keyB testKey
	password   = []byte("correct horse battery staple")
)

type testKey struct{ priv, pub string }

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "signing-test-")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for _, k := range []struct {
		sub string
		key *testKey
	}{{"a", &keyA}, {"b", &keyB}} {
		k.key.priv, k.key.pub, err = GenerateKeyPair(filepath.Join(dir, k.sub), password)
		if err != nil {
			log.Print(err)
			return 1
		}
	}
	return m.Run()
}

// newRegistry starts an in-memory plain-HTTP registry on 127.0.0.1 and
// returns its host:port.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func pushImage(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d := mustDigest(t, host, repo, h)
	if err := remote.Write(d, img); err != nil {
		t.Fatal(err)
	}
	return d
}

func pushIndex(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d := mustDigest(t, host, repo, h)
	if err := remote.WriteIndex(d, idx); err != nil {
		t.Fatal(err)
	}
	return d
}

func mustDigest(t *testing.T, host, repo string, h v1.Hash) name.Digest {
	t.Helper()
	d, err := name.NewDigest(fmt.Sprintf("%s/%s@%s", host, repo, h))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sigTag returns the cosign signature tag of d.
func sigTag(d name.Digest) name.Tag {
	return d.Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig")
}

// sigLayers returns the signature image at d's .sig tag and its payloads.
func sigLayers(t *testing.T, d name.Digest) (v1.Image, []payload.SimpleContainerImage) {
	t.Helper()
	img, err := remote.Image(sigTag(d))
	if err != nil {
		t.Fatalf("reading %s: %v", sigTag(d), err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []payload.SimpleContainerImage
	for i, l := range layers {
		if got := string(m.Layers[i].MediaType); got != "application/vnd.dev.cosign.simplesigning.v1+json" {
			t.Errorf("layer %d media type = %q", i, got)
		}
		if m.Layers[i].Annotations["dev.cosignproject.cosign/signature"] == "" {
			t.Errorf("layer %d has no signature annotation", i)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("layer %d payload: %v", i, err)
		}
		out = append(out, p)
	}
	return img, out
}

func TestGenerateKeyPair(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path, pemType string
		perm          os.FileMode
	}{
		{keyA.priv, cosign.SigstorePrivateKeyPemType, 0o600},
		{keyA.pub, "PUBLIC KEY", 0o644},
	} {
		b, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != tc.pemType {
			t.Errorf("%s: want one PEM block %q, got %v", tc.path, tc.pemType, blk)
		}
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tc.perm {
			t.Errorf("%s: mode %v, want %v", tc.path, fi.Mode().Perm(), tc.perm)
		}
	}
	if filepath.Base(keyA.priv) != "cosign.key" || filepath.Base(keyA.pub) != "cosign.pub" {
		t.Errorf("unexpected file names %s, %s", keyA.priv, keyA.pub)
	}

	before, err := os.ReadFile(keyA.priv)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := GenerateKeyPair(filepath.Dir(keyA.priv), password); err == nil {
		t.Error("GenerateKeyPair overwrote an existing key pair")
	}
	after, err := os.ReadFile(keyA.priv)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("existing private key was modified")
	}
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host := newRegistry(t)
	img := pushImage(t, host, "portico/controller")
	idx := pushIndex(t, host, "portico/operator")
	digests := []name.Digest{img, idx}

	if err := Sign(ctx, keyA.priv, password, digests); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if err := Verify(ctx, keyA.pub, digests); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, d := range digests {
		_, payloads := sigLayers(t, d)
		if len(payloads) != 1 {
			t.Fatalf("%s: %d signature layers, want 1", d, len(payloads))
		}
		p := payloads[0]
		if p.Critical.Image.DockerManifestDigest != d.DigestStr() {
			t.Errorf("payload digest %q, want %q", p.Critical.Image.DockerManifestDigest, d.DigestStr())
		}
		if p.Critical.Identity.DockerReference != d.Repository.Name() {
			t.Errorf("payload docker-reference %q, want %q", p.Critical.Identity.DockerReference, d.Repository.Name())
		}
		if p.Critical.Type != payload.CosignSignatureType {
			t.Errorf("payload type %q", p.Critical.Type)
		}
	}
}

func TestVerifyWrongKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host := newRegistry(t)
	d := pushImage(t, host, "portico/controller")
	if err := Sign(ctx, keyA.priv, password, []name.Digest{d}); err != nil {
		t.Fatal(err)
	}
	err := Verify(ctx, keyB.pub, []name.Digest{d})
	if err == nil {
		t.Fatal("Verify with another key pair succeeded")
	}
	if !strings.Contains(err.Error(), d.String()) {
		t.Errorf("error does not name %s: %v", d, err)
	}
	t.Log(err)
}

func TestVerifyUnsigned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host := newRegistry(t)
	signed := pushImage(t, host, "portico/controller")
	unsigned := pushIndex(t, host, "portico/operator")
	if err := Sign(ctx, keyA.priv, password, []name.Digest{signed}); err != nil {
		t.Fatal(err)
	}
	err := Verify(ctx, keyA.pub, []name.Digest{signed, unsigned})
	if err == nil {
		t.Fatal("Verify of an unsigned digest succeeded")
	}
	if !strings.Contains(err.Error(), unsigned.String()) || strings.Contains(err.Error(), signed.String()) {
		t.Errorf("error should name %s (only): %v", unsigned, err)
	}
	var none *cosign.ErrNoSignaturesFound
	if !strings.Contains(err.Error(), "not signed") || !errors.As(err, &none) {
		t.Errorf("error should say the digest is not signed: %v", err)
	}
	t.Log(err)
}

func TestSignTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host := newRegistry(t)
	d := pushImage(t, host, "portico/controller")
	ds := []name.Digest{d}

	for i := range 2 {
		if err := Sign(ctx, keyA.priv, password, ds); err != nil {
			t.Fatalf("Sign #%d: %v", i+1, err)
		}
	}
	if err := Verify(ctx, keyA.pub, ds); err != nil {
		t.Fatalf("Verify after signing twice: %v", err)
	}
	if _, p := sigLayers(t, d); len(p) != 1 {
		t.Errorf("signing twice with one key left %d layers, want 1", len(p))
	}

	// Another key adds its signature next to the first one.
	if err := Sign(ctx, keyB.priv, password, ds); err != nil {
		t.Fatalf("Sign with second key: %v", err)
	}
	if _, p := sigLayers(t, d); len(p) != 2 {
		t.Errorf("after signing with a second key: %d layers, want 2", len(p))
	}
	for _, k := range []testKey{keyA, keyB} {
		if err := Verify(ctx, k.pub, ds); err != nil {
			t.Errorf("Verify with %s: %v", k.pub, err)
		}
	}
}

func TestCopiedSignatureRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host := newRegistry(t)
	a := pushImage(t, host, "portico/controller")
	b := pushImage(t, host, "portico/controller")
	if err := Sign(ctx, keyA.priv, password, []name.Digest{a}); err != nil {
		t.Fatal(err)
	}
	sigA, _ := sigLayers(t, a)
	if err := remote.Write(sigTag(b), sigA); err != nil {
		t.Fatal(err)
	}

	err := Verify(ctx, keyA.pub, []name.Digest{b})
	if err == nil {
		t.Fatal("a signature of A verified for B")
	}
	if !strings.Contains(err.Error(), b.String()) || !strings.Contains(err.Error(), a.DigestStr()) {
		t.Errorf("error should name %s and the signed digest %s: %v", b, a.DigestStr(), err)
	}
	t.Log(err)
	if err := Verify(ctx, keyA.pub, []name.Digest{a}); err != nil {
		t.Errorf("A itself: %v", err)
	}
}

func TestSignErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host := newRegistry(t)
	d := pushImage(t, host, "portico/controller")
	missing := mustDigest(t, host, "portico/controller", v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)})

	if err := Sign(ctx, keyA.priv, []byte("wrong"), []name.Digest{d}); err == nil {
		t.Error("Sign with a wrong password succeeded")
	}
	if err := Sign(ctx, keyA.priv, password, []name.Digest{missing}); err == nil || !strings.Contains(err.Error(), missing.String()) {
		t.Errorf("Sign of a digest not in the registry: want error naming it, got %v", err)
	}
	if err := Sign(ctx, keyA.priv, password, nil); err == nil {
		t.Error("Sign of no digests succeeded")
	}
	if err := Verify(ctx, keyA.pub, nil); err == nil {
		t.Error("Verify of no digests succeeded")
	}
	if err := Verify(ctx, keyA.priv, []name.Digest{d}); err == nil {
		t.Error("Verify with a private key file as public key succeeded")
	}
}
