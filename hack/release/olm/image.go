package olm

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"testing/fstest"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/portico-dev/portico/hack/release/oci"
)

// ConfigsLabel is the label of a catalog image naming the directory of its
// file-based catalog; CatalogImage puts the catalog in ConfigsDir.
const (
	ConfigsLabel = "operators.operatorframework.io.index.configs.v1"
	ConfigsDir   = "/configs"
	// DefaultOPMImage is the base of a catalog image: opm, which serves
	// the catalog, with grpc_health_probe for OLM's probes.
	DefaultOPMImage = "quay.io/operator-framework/opm:v1.61.0"
	// CatalogImageName is the catalog image's repository below a registry.
	CatalogImageName = "portico-catalog"
)

// maxBundleFile bounds one file read from a bundle image.
const maxBundleFile = 8 << 20

// BundleFiles are the files of a bundle image (every layer applied, as
// OLM's unpack Job sees them).
func BundleFiles(img v1.Image) (fstest.MapFS, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	files := fstest.MapFS{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > maxBundleFile {
			return nil, fmt.Errorf("bundle file %s is %d bytes, over %d", h.Name, h.Size, maxBundleFile)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(path.Clean("/"+h.Name), "/")] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
}

// CatalogImage is base, an image with opm (as quay.io/operator-framework/opm),
// plus the catalog at /configs/<package>/catalog.yaml, labelled for OLM
// and started as `opm serve /configs`, which is what a CatalogSource's
// registry pod runs. The base must have a writable /tmp.
func CatalogImage(base v1.Image, cfg declcfg.DeclarativeConfig, pkg string, epoch time.Time) (v1.Image, error) {
	doc, err := WriteYAML(cfg)
	if err != nil {
		return nil, err
	}
	layer, err := oci.Layer([]oci.Entry{
		{Path: "configs", Dir: true, Mode: 0o755},
		{Path: "configs/" + pkg, Dir: true, Mode: 0o755},
		{Path: "configs/" + pkg + "/catalog.yaml", Data: doc, Mode: 0o644},
	}, epoch)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: epoch}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "olm.CatalogImage", Comment: "file-based catalog of " + pkg},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	cf.Config.Labels[ConfigsLabel] = ConfigsDir
	cf.Config.Entrypoint = []string{"/bin/opm"}
	// No --cache-dir: opm builds its cache under /tmp when the pod starts.
	// Upstream catalogs pre-build it with `RUN opm serve --cache-only`, which
	// an image assembled without running opm cannot do, and opm refuses a
	// --cache-dir without a valid cache.
	cf.Config.Cmd = []string{"serve", ConfigsDir}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, created)
}

// CatalogOptions publish a catalog image.
type CatalogOptions struct {
	// Repository receives the catalog image (registry/path/portico-catalog)
	// under Tag.
	Repository string
	Tag        string
	// Base is the opm image the catalog is served by (DefaultOPMImage).
	Base string
	// Bundles are the bundle images (by digest) the catalog lists.
	Bundles []string
	Channel string
	Epoch   time.Time
	Remote  []remote.Option
	// Insecure allows plain HTTP to every registry (a local one).
	Insecure bool
}

// PublishCatalog renders the catalog of the package from the bundle
// images, builds its image on the opm base (every platform of a
// multi-platform base) and pushes it; it returns the image's digest
// reference and the catalog.
func PublishCatalog(ctx context.Context, o CatalogOptions) (name.Digest, *declcfg.DeclarativeConfig, error) {
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	ropts := append([]remote.Option{remote.WithContext(ctx)}, o.Remote...)
	var rendered []Rendered
	for _, ref := range o.Bundles {
		r, err := name.ParseReference(ref, opts...)
		if err != nil {
			return name.Digest{}, nil, err
		}
		img, err := remote.Image(r, ropts...)
		if err != nil {
			return name.Digest{}, nil, fmt.Errorf("bundle %s: %w", ref, err)
		}
		files, err := BundleFiles(img)
		if err != nil {
			return name.Digest{}, nil, fmt.Errorf("bundle %s: %w", ref, err)
		}
		b, err := RenderBundle(ref, files)
		if err != nil {
			return name.Digest{}, nil, fmt.Errorf("bundle %s: %w", ref, err)
		}
		rendered = append(rendered, b)
	}
	cfg, err := Catalog(Package, o.Channel, rendered)
	if err != nil {
		return name.Digest{}, nil, err
	}
	baseRef, err := name.ParseReference(o.Base, opts...)
	if err != nil {
		return name.Digest{}, nil, err
	}
	tag, err := name.NewTag(o.Repository+":"+o.Tag, opts...)
	if err != nil {
		return name.Digest{}, nil, err
	}
	desc, err := remote.Get(baseRef, ropts...)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("opm image %s: %w", o.Base, err)
	}
	var digest v1.Hash
	if desc.MediaType.IsIndex() {
		digest, err = pushCatalogIndex(desc, *cfg, tag, o.Epoch, ropts)
	} else {
		digest, err = pushCatalogImage(desc, *cfg, tag, o.Epoch, ropts)
	}
	if err != nil {
		return name.Digest{}, nil, err
	}
	return tag.Context().Digest(digest.String()), cfg, nil
}

func pushCatalogImage(desc *remote.Descriptor, cfg declcfg.DeclarativeConfig, tag name.Tag, epoch time.Time, ropts []remote.Option) (v1.Hash, error) {
	base, err := desc.Image()
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := CatalogImage(base, cfg, Package, epoch)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(tag, img, ropts...); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// pushCatalogIndex builds the catalog image on every platform of a
// multi-platform opm image.
func pushCatalogIndex(desc *remote.Descriptor, cfg declcfg.DeclarativeConfig, tag name.Tag, epoch time.Time, ropts []remote.Option) (v1.Hash, error) {
	baseIdx, err := desc.ImageIndex()
	if err != nil {
		return v1.Hash{}, err
	}
	im, err := baseIdx.IndexManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	var adds []mutate.IndexAddendum
	for _, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS == "unknown" || !m.MediaType.IsImage() {
			continue // attestations and other non-images
		}
		base, err := baseIdx.Image(m.Digest)
		if err != nil {
			return v1.Hash{}, err
		}
		img, err := CatalogImage(base, cfg, Package, epoch)
		if err != nil {
			return v1.Hash{}, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: m.Platform}})
	}
	if len(adds) == 0 {
		return v1.Hash{}, fmt.Errorf("opm image index %s has no platform images", desc.Digest)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, im.MediaType), adds...)
	if err := remote.WriteIndex(tag, idx, ropts...); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
