package publish

import (
	"path/filepath"

	"github.com/portico-dev/portico/hack/release/bundle"
	"github.com/portico-dev/portico/hack/release/helmchart"
)

// GenerateBundle writes the OLM bundle of the release into dir/bundle
// (manifests/, metadata/) and dir/bundle.Dockerfile, every image pinned by
// digest: the chart at root rendered by package bundle, as `make bundle`
// does.
func GenerateBundle(root, dir string, images helmchart.Images) ([]string, error) {
	o := bundle.Options{
		ChartDir:       filepath.Join(root, "charts", helmchart.Name),
		ConfigDir:      filepath.Join(root, "config"),
		Version:        images.Version,
		Registry:       images.Registry,
		Namespace:      bundle.DefaultNamespace,
		Channels:       []string{bundle.DefaultChannel},
		DefaultChannel: bundle.DefaultChannel,
		Digests:        images.Digests,
	}
	output, dockerfile := filepath.Join(dir, "bundle"), filepath.Join(dir, "bundle.Dockerfile")
	var err error
	if o.BundleDir, err = bundle.ContextDir(output, dockerfile); err != nil {
		return nil, err
	}
	b, err := bundle.Generate(o)
	if err != nil {
		return nil, err
	}
	return b.Warnings, b.Write(output, dockerfile)
}
