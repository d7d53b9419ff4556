package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/manifest"
)

// GenerateBundle writes the OLM bundle of the release into dir (manifests/,
// metadata/) with hack/bundle, every image pinned by digest.
func GenerateBundle(ctx context.Context, root, dir string, images ChartImages, log io.Writer) error {
	args := []string{"run", "./hack/bundle", "--version", images.Version, "--registry", images.Registry,
		"--output", filepath.Join(dir, "bundle"), "--dockerfile", filepath.Join(dir, "bundle.Dockerfile")}
	names := make([]string, 0, len(images.Digests))
	for name := range images.Digests {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "--digest", name+"="+images.Digests[name])
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/bundle: %w", err)
	}
	return nil
}

// BuildBundleImage is the OLM bundle image (registry+v1) of the bundle directory
// dir: its manifests/ and metadata/ in one layer, and the bundle
// annotations of metadata/annotations.yaml as labels, as bundle.Dockerfile
// builds it.
func BuildBundleImage(dir, version string, epoch time.Time) (v1.Image, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, err
	}
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(raw, &annotations); err != nil {
		return nil, fmt.Errorf("metadata/annotations.yaml: %w", err)
	}
	if len(annotations.Annotations) == 0 {
		return nil, fmt.Errorf("metadata/annotations.yaml has no annotations")
	}
	files, err := manifest.ReadTree(dir, "manifests", "metadata")
	if err != nil {
		return nil, err
	}
	layer, err := tarLayer(files, 0o644, epoch)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   BundleImage,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://" + Module,
	}
	for k, v := range annotations.Annotations {
		labels[k] = v
	}
	base, err := mutate.ConfigFile(ociBase(), &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Config:       v1.Config{Labels: labels},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: epoch}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "hack/bundle", Comment: "manifests/ and metadata/"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, created)
}
