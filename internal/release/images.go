package release

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/portico-dev/portico/internal/contract"
)

// Module is Portico's Go module path.
const Module = "github.com/portico-dev/portico"

// nonRoot is the user of every image, the distroless "nonroot" user.
const nonRoot = "65532:65532"

// Image is one image a release (or a test) builds: its name below the
// registry, the Go package of its binary and where the binary lives in the
// image.
type Image struct {
	Name    string
	Package string
	Binary  string
}

// OperatorImage is the operator's image name.
const OperatorImage = contract.OperatorName

// BundleImage is the OLM bundle image's name.
const BundleImage = "portico-operator-bundle"

// ChartName is the Helm chart's name; it is pushed to <registry>/charts/<ChartName>.
const ChartName = "portico"

// ProductImages lists the images of a release of the tree at root: the
// operator and one image per controller of the contract, sorted.
func ProductImages(root string) ([]Image, error) {
	if _, err := os.Stat(filepath.Join(root, "operator", "main.go")); err != nil {
		return nil, fmt.Errorf("no operator/main.go under %s: not the repository root", root)
	}
	images := []Image{{Name: OperatorImage, Package: "./operator", Binary: "/" + contract.OperatorName}}
	for _, c := range contract.Controllers {
		images = append(images, Image{Name: c.Binary(), Package: "./controllers/" + string(c.Name), Binary: "/controller"})
	}
	slices.SortFunc(images, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return images, nil
}

// TestImages are the images only the tests use: the node's sandbox image
// and the e2e suite's in-cluster agent.
func TestImages() []Image {
	return []Image{
		{Name: "pause", Package: "./hack/pause", Binary: "/pause"},
		{Name: "e2e-agent", Package: "./e2e/agent", Binary: "/e2e-agent"},
	}
}

// LDFlags are the linker flags of every binary: stripped, with the version
// in contract.VersionVariable, which every binary links.
func LDFlags(version string) string {
	return "-s -w -X " + contract.VersionVariable + "=" + version
}

// ParsePlatforms parses "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		if platform.OS != "linux" {
			return nil, fmt.Errorf("platform %s: only linux images are built", p)
		}
		out = append(out, *platform)
	}
	if len(out) == 0 {
		return nil, errors.New("no platform")
	}
	return out, nil
}

// PlatformImage is one platform's image of an index and the binary in it.
type PlatformImage struct {
	Platform v1.Platform
	Image    v1.Image
	// BinaryPath is the binary on disk, for its SBOM.
	BinaryPath string
}

// Builder builds images from the tree at Root.
type Builder struct {
	Root    string
	Version string
	// Epoch is every timestamp of the images.
	Epoch time.Time
	// WorkDir holds the binaries.
	WorkDir string
	// Log receives the builder's progress.
	Log io.Writer
}

// Build builds img for every platform and returns the OCI image index and
// its platform images, in the order of platforms.
func (b Builder) Build(ctx context.Context, img Image, platforms []v1.Platform) (v1.ImageIndex, []PlatformImage, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var built []PlatformImage
	for _, p := range platforms {
		binary := filepath.Join(b.WorkDir, p.OS+"-"+p.Architecture+p.Variant, img.Name)
		if err := b.goBuild(ctx, img.Package, p, binary); err != nil {
			return nil, nil, err
		}
		image, err := b.image(img, p, binary)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", img.Name, p, err)
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        image,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
		built = append(built, PlatformImage{Platform: p, Image: image, BinaryPath: binary})
	}
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.title":   img.Name,
		"org.opencontainers.image.version": b.Version,
		"org.opencontainers.image.source":  "https://" + Module,
		"org.opencontainers.image.created": b.Epoch.UTC().Format(time.RFC3339),
	}).(v1.ImageIndex)
	return idx, built, nil
}

// goBuild builds pkg for the platform into out: static, trimmed paths, no
// VCS stamp, so the bytes depend only on the sources, the toolchain and the
// version.
func (b Builder) goBuild(ctx context.Context, pkg string, p v1.Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", LDFlags(b.Version), "-o", out, pkg)
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = b.logWriter(), b.logWriter()
	if b.Log != nil {
		fmt.Fprintf(b.Log, "go build %s (%s)\n", pkg, p)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", pkg, p, err)
	}
	return nil
}

func (b Builder) logWriter() io.Writer {
	if b.Log == nil {
		return io.Discard
	}
	return b.Log
}

// image is one binary in one layer on an empty base, run as 65532:65532,
// with OCI media types and every timestamp at the epoch.
func (b Builder) image(img Image, p v1.Platform, binary string) (v1.Image, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layer, err := tarLayer(map[string][]byte{strings.TrimPrefix(img.Binary, "/"): content}, 0o755, b.Epoch)
	if err != nil {
		return nil, err
	}
	return ImageOf(p, v1.Config{
		Entrypoint: []string{img.Binary},
		User:       nonRoot,
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   img.Name,
			"org.opencontainers.image.version": b.Version,
			"org.opencontainers.image.source":  "https://" + Module,
		},
	}, b.Epoch, v1.History{CreatedBy: "go build " + img.Package, Comment: img.Binary}, layer)
}

// ImageOf is an OCI image for platform p of one layer with config cfg,
// every timestamp at epoch; history describes the layer.
func ImageOf(p v1.Platform, cfg v1.Config, epoch time.Time, history v1.History, layer v1.Layer) (v1.Image, error) {
	base, err := mutate.ConfigFile(ociBase(), &v1.ConfigFile{
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

// ociBase is an empty image with OCI media types.
func ociBase() v1.Image {
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

// tarLayer is a Layer of regular files (path → content), all with mode.
func tarLayer(files map[string][]byte, mode int64, mtime time.Time) (v1.Layer, error) {
	entries := make([]Entry, 0, len(files))
	for path, data := range files {
		entries = append(entries, Entry{Path: path, Data: data, Mode: mode})
	}
	return Layer(entries, mtime)
}
