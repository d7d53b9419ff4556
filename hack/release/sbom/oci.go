package sbom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// emptyJSON is the content of the OCI empty descriptor.
var emptyJSON = []byte("{}")

// sbomTitle names the SBOM layer for tools that save layers as files (oras pull).
const sbomTitle = "sbom.cdx.json"

// maxSBOMSize bounds what Find reads from a registry.
const maxSBOMSize = 64 << 20

// Attach pushes sbom as a referrer of subject (a platform manifest digest;
// desc is its descriptor: mediaType, size, digest) and returns the referrer's
// digest. Registries without the referrers API get the OCI fallback tag
// (sha256-<hex>), which go-containerregistry's remote.Put maintains for a
// manifest with a subject.
//
// The referrer is identified by its content only, so attaching the same SBOM
// to the same subject twice pushes the same manifest and adds no second
// referrer.
func Attach(ctx context.Context, subject name.Digest, desc v1.Descriptor, sbom []byte, opts ...remote.Option) (name.Digest, error) {
	if desc.Digest.String() != subject.DigestStr() {
		return name.Digest{}, fmt.Errorf("descriptor digest %s is not the subject's %s", desc.Digest, subject.DigestStr())
	}
	if desc.MediaType == "" || desc.Size <= 0 {
		return name.Digest{}, fmt.Errorf("descriptor of %s needs a media type and a size", subject)
	}
	if !json.Valid(sbom) {
		return name.Digest{}, errors.New("SBOM is not JSON")
	}
	opts = withContext(ctx, opts)
	return putArtifact(subject, desc, ArtifactType, sbom, map[string]string{"org.opencontainers.image.title": sbomTitle}, opts)
}

// putArtifact pushes an OCI 1.1 artifact of artifactType whose one layer is
// content (with the layer annotations given) as a referrer of subject, and
// returns its digest.
func putArtifact(subject name.Digest, desc v1.Descriptor, artifactType string, content []byte, annotations map[string]string, opts []remote.Option) (name.Digest, error) {
	repo := subject.Context()
	config := static.NewLayer(emptyJSON, types.OCIEmptyJSON)
	layer := static.NewLayer(content, types.MediaType(artifactType))
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing %s blobs to %s: %w", artifactType, repo, err)
		}
	}
	configDesc, err := partial.Descriptor(config)
	if err != nil {
		return name.Digest{}, err
	}
	layerDesc, err := partial.Descriptor(layer)
	if err != nil {
		return name.Digest{}, err
	}
	layerDesc.Annotations = annotations
	raw, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        *configDesc,
		Layers:        []v1.Descriptor{*layerDesc},
		Subject:       &v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest},
	})
	if err != nil {
		return name.Digest{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return name.Digest{}, err
	}
	ref := repo.Digest(h.String())
	if err := remote.Put(ref, rawManifest(raw), opts...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s referrer of %s: %w", artifactType, subject, err)
	}
	return ref, nil
}

// Find returns the SBOMs attached to subject (their bytes), ordered by the
// digest of their referrer manifests.
//
// It lists the subject's referrers with remote.Referrers (referrers API, or
// the fallback tag) and keeps those of artifact type [ArtifactType]. The
// artifactType filter is applied here rather than with remote.WithFilter
// because some registries (go-containerregistry's own test registry among
// them) report a referrer's artifactType from its config media type, which
// for an OCI 1.1 artifact is the empty descriptor's; referrers reported with
// that type or none are fetched and judged by their manifest.
func Find(ctx context.Context, subject name.Digest, opts ...remote.Option) ([][]byte, error) {
	opts = withContext(ctx, opts)
	idx, err := remote.Referrers(subject, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing referrers of %s: %w", subject, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("listing referrers of %s: %w", subject, err)
	}

	var candidates []v1.Descriptor
	for _, d := range im.Manifests {
		if d.MediaType.IsIndex() {
			continue
		}
		switch d.ArtifactType {
		case ArtifactType, "", string(types.OCIEmptyJSON):
			candidates = append(candidates, d)
		}
	}
	slices.SortFunc(candidates, func(a, b v1.Descriptor) int {
		return strings.Compare(a.Digest.String(), b.Digest.String())
	})
	candidates = slices.CompactFunc(candidates, func(a, b v1.Descriptor) bool { return a.Digest == b.Digest })

	var sboms [][]byte
	for _, d := range candidates {
		found, err := sbomLayers(subject, d.Digest, opts)
		if err != nil {
			return nil, err
		}
		sboms = append(sboms, found...)
	}
	return sboms, nil
}

// sbomLayers returns the SBOM layers of referrer manifest dgst, or nothing if
// it is not an SBOM of subject.
func sbomLayers(subject name.Digest, dgst v1.Hash, opts []remote.Option) ([][]byte, error) {
	repo := subject.Context()
	ref := repo.Digest(dgst.String())
	got, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("fetching referrer %s: %w", ref, err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(got.Manifest, &m); err != nil {
		return nil, fmt.Errorf("referrer %s: %w", ref, err)
	}
	artifactType := m.ArtifactType
	if artifactType == "" { // artifact made before image-spec 1.1
		artifactType = string(m.Config.MediaType)
	}
	if artifactType != ArtifactType || m.Subject == nil || m.Subject.Digest.String() != subject.DigestStr() {
		return nil, nil
	}

	var out [][]byte
	for _, l := range m.Layers {
		if l.MediaType != ArtifactType {
			continue
		}
		if l.Size > maxSBOMSize {
			return nil, fmt.Errorf("SBOM %s in referrer %s is too large (%d bytes)", l.Digest, ref, l.Size)
		}
		b, err := readBlob(repo.Digest(l.Digest.String()), opts)
		if err != nil {
			return nil, fmt.Errorf("fetching SBOM %s of referrer %s: %w", l.Digest, ref, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func readBlob(ref name.Digest, opts []remote.Option) ([]byte, error) {
	l, err := remote.Layer(ref, opts...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed() // the blob as stored, digest-verified
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, maxSBOMSize+1))
}

// withContext appends ctx last so that it wins over a remote.WithContext in opts.
func withContext(ctx context.Context, opts []remote.Option) []remote.Option {
	return append(slices.Clone(opts), remote.WithContext(ctx))
}

// rawManifest is an OCI image manifest for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
