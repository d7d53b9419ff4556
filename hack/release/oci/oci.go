package oci

import (
	"archive/tar"
	"bytes"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ImageOf is an OCI image for platform p of one layer with config cfg,
// every timestamp at epoch; history describes the layer.
func ImageOf(p v1.Platform, cfg v1.Config, epoch time.Time, history v1.History, layer v1.Layer) (v1.Image, error) {
	base, err := mutate.ConfigFile(Base(), &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Config:       cfg,
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: epoch}
	history.Created = created
	withLayer, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: history})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(withLayer, created)
}

// Base is an empty image with OCI media types.
func Base() v1.Image {
	return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
}

// Entry is one regular file (Data, Mode) or directory (Dir, Mode) of a
// layer; Path is relative to the image's root, with slashes.
type Entry struct {
	Path string
	Data []byte
	Mode int64
	Dir  bool
}

// Layer is an OCI layer (uncompressed tar, as the registry stores it
// gzipped) of entries sorted by path, owned by root, every timestamp at
// mtime. Parent directories are not listed unless they are entries.
func Layer(entries []Entry, mtime time.Time) (v1.Layer, error) {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range sorted {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.Path, Mode: e.Mode, Size: int64(len(e.Data)), ModTime: mtime, Format: tar.FormatPAX}
		if e.Dir {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, strings.TrimSuffix(e.Path, "/")+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// FilesLayer is a Layer of regular files (path → content), all with mode.
func FilesLayer(files map[string][]byte, mode int64, mtime time.Time) (v1.Layer, error) {
	entries := make([]Entry, 0, len(files))
	for path, data := range files {
		entries = append(entries, Entry{Path: path, Data: data, Mode: mode})
	}
	return Layer(entries, mtime)
}
