package publish

import (
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
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/portico-dev/portico/hack/release/oci"
	"github.com/portico-dev/portico/internal/contract"
)

// contract.Module is Portico's Go module path.

// nonRoot is the user of every image, the distroless "nonroot" user.
const nonRoot = "65532:65532"

// Image is one image a release (or a test) builds: its name below the
// registry, the Go package of its binary and where the binary lives in the
// image.
type Image struct {
	Name string
	// Module is the directory of the Go module the package is built in,
	// relative to the repository root ("" for the root module).
	Module  string
	Package string
	Binary  string
}

// OperatorImage is the operator's image name.
const OperatorImage = contract.OperatorName

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
		{Name: "e2e-agent", Module: "e2e", Package: "./agent", Binary: "/e2e-agent"},
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
		if err := b.goBuild(ctx, img.Module, img.Package, p, binary); err != nil {
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
		"org.opencontainers.image.source":  "https://" + contract.Module,
		"org.opencontainers.image.created": b.Epoch.UTC().Format(time.RFC3339),
	}).(v1.ImageIndex)
	return idx, built, nil
}

// goBuild builds pkg of the module in directory module (relative to the
// root) for the platform into out: static, trimmed paths, no
// VCS stamp, so the bytes depend only on the sources, the toolchain and the
// version.
func (b Builder) goBuild(ctx context.Context, module, pkg string, p v1.Platform, out string) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", LDFlags(b.Version), "-o", out, pkg)
	cmd.Dir = filepath.Join(b.Root, module)
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
	layer, err := oci.FilesLayer(map[string][]byte{strings.TrimPrefix(img.Binary, "/"): content}, 0o755, b.Epoch)
	if err != nil {
		return nil, err
	}
	return oci.ImageOf(p, v1.Config{
		Entrypoint: []string{img.Binary},
		User:       nonRoot,
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   img.Name,
			"org.opencontainers.image.version": b.Version,
			"org.opencontainers.image.source":  "https://" + contract.Module,
		},
	}, b.Epoch, v1.History{CreatedBy: "go build " + img.Package, Comment: img.Binary}, layer)
}
