package olm

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/hack/release/oci"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/manifest"
)

// BundleImage is the OLM bundle image's name below a registry.
const BundleImage = "portico-operator-bundle"

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
	layer, err := oci.FilesLayer(files, 0o644, epoch)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   BundleImage,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://" + contract.Module,
	}
	for k, v := range annotations.Annotations {
		labels[k] = v
	}
	base, err := mutate.ConfigFile(oci.Base(), &v1.ConfigFile{
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
