package olm

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/hack/release/bundle"
)

// Package is Portico's OLM package and Channel the channel every release
// is published to (the bundle generator's defaults).
const (
	Package = bundle.Package
	Channel = bundle.DefaultChannel
)

// bundleAnnotations are metadata/annotations.yaml's.
type bundleAnnotations struct {
	Annotations map[string]string `json:"annotations"`
}

const annotationPrefix = bundle.AnnotationPrefix

// Rendered is one bundle of a catalog: its olm.bundle, and the CSV's icon,
// which the package shows when this is the newest bundle.
type Rendered struct {
	Bundle declcfg.Bundle
	Icon   *declcfg.Icon
}

// RenderBundle is the olm.bundle of the registry+v1 bundle whose files
// (manifests/, metadata/annotations.yaml) are in files, published as
// image, as `opm render` writes it: the package and version, every API
// the CSV owns (olm.gvk) and requires (olm.gvk.required), the CSV's
// metadata, and the related images (the bundle image and the CSV's
// relatedImages). OLM unpacks the bundle image itself when it installs.
// The CSV's icon comes along for the package.
func RenderBundle(image string, files fs.FS) (Rendered, error) {
	raw, err := fs.ReadFile(files, "metadata/annotations.yaml")
	if err != nil {
		return Rendered{}, err
	}
	var ann bundleAnnotations
	if err := sigsyaml.Unmarshal(raw, &ann); err != nil {
		return Rendered{}, fmt.Errorf("metadata/annotations.yaml: %w", err)
	}
	pkg := ann.Annotations[annotationPrefix+"package.v1"]
	if pkg == "" {
		return Rendered{}, fmt.Errorf("metadata/annotations.yaml names no package (%spackage.v1)", annotationPrefix)
	}
	if mt := ann.Annotations[annotationPrefix+"mediatype.v1"]; mt != "registry+v1" {
		return Rendered{}, fmt.Errorf("bundle media type %q: only registry+v1 is supported", mt)
	}
	csv, err := findCSV(files, ann.Annotations[annotationPrefix+"manifests.v1"])
	if err != nil {
		return Rendered{}, err
	}
	props := []property.Property{property.MustBuildPackage(pkg, csv.Spec.Version.String())}
	for _, crd := range csv.Spec.CustomResourceDefinitions.Owned {
		props = append(props, property.MustBuildGVK(crdGroup(crd.Name), crd.Version, crd.Kind))
	}
	for _, crd := range csv.Spec.CustomResourceDefinitions.Required {
		props = append(props, property.MustBuildGVKRequired(crdGroup(crd.Name), crd.Version, crd.Kind))
	}
	props = append(props, property.MustBuildCSVMetadata(*csv))
	related := []declcfg.RelatedImage{{Image: image}}
	for _, ri := range csv.Spec.RelatedImages {
		related = append(related, declcfg.RelatedImage{Name: ri.Name, Image: ri.Image})
	}
	r := Rendered{Bundle: declcfg.Bundle{
		Schema:        declcfg.SchemaBundle,
		Name:          csv.Name,
		Package:       pkg,
		Image:         image,
		Properties:    props,
		RelatedImages: related,
	}}
	if len(csv.Spec.Icon) > 0 {
		data, err := base64.StdEncoding.DecodeString(csv.Spec.Icon[0].Data)
		if err != nil {
			return Rendered{}, fmt.Errorf("CSV %s: icon: %w", csv.Name, err)
		}
		r.Icon = &declcfg.Icon{Data: data, MediaType: csv.Spec.Icon[0].MediaType}
	}
	return r, nil
}

// findCSV is the one ClusterServiceVersion in the manifests directory.
func findCSV(files fs.FS, dir string) (*v1alpha1.ClusterServiceVersion, error) {
	dir = strings.Trim(dir, "/")
	if dir == "" {
		dir = "manifests"
	}
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, err
	}
	var found *v1alpha1.ClusterServiceVersion
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		raw, err := fs.ReadFile(files, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := sigsyaml.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if meta.Kind != v1alpha1.ClusterServiceVersionKind {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%s holds more than one ClusterServiceVersion", dir)
		}
		found = &v1alpha1.ClusterServiceVersion{}
		if err := sigsyaml.Unmarshal(raw, found); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%s holds no ClusterServiceVersion", dir)
	}
	return found, nil
}

// crdGroup is the API group of a CRD named <plural>.<group>.
func crdGroup(name string) string {
	_, group, _ := strings.Cut(name, ".")
	return group
}

// Catalog is the file-based catalog of one package: the bundles, and the
// channel whose entries upgrade each version to the next in semver order
// (each replaces the one before), which is also the default channel. The
// package's description and icon are the newest bundle's. The catalog
// validates as `opm validate` checks it.
func Catalog(pkg, channel string, bundles []Rendered) (*declcfg.DeclarativeConfig, error) {
	if len(bundles) == 0 {
		return nil, fmt.Errorf("a catalog of %s needs at least one bundle", pkg)
	}
	type versioned struct {
		bundle  declcfg.Bundle
		icon    *declcfg.Icon
		version semver.Version
	}
	sorted := make([]versioned, 0, len(bundles))
	for _, r := range bundles {
		b := r.Bundle
		if b.Package != pkg {
			return nil, fmt.Errorf("bundle %s is of package %q, not %q", b.Name, b.Package, pkg)
		}
		v, err := bundleVersion(b)
		if err != nil {
			return nil, err
		}
		sorted = append(sorted, versioned{b, r.Icon, v})
	}
	slices.SortFunc(sorted, func(a, b versioned) int { return a.version.Compare(b.version) })
	cfg := &declcfg.DeclarativeConfig{}
	ch := declcfg.Channel{Schema: declcfg.SchemaChannel, Name: channel, Package: pkg}
	for i, v := range sorted {
		if i > 0 && v.version.EQ(sorted[i-1].version) {
			return nil, fmt.Errorf("bundles %s and %s have the same version %s", sorted[i-1].bundle.Name, v.bundle.Name, v.version)
		}
		entry := declcfg.ChannelEntry{Name: v.bundle.Name}
		if i > 0 {
			entry.Replaces = sorted[i-1].bundle.Name
		}
		ch.Entries = append(ch.Entries, entry)
		cfg.Bundles = append(cfg.Bundles, v.bundle)
	}
	newest := sorted[len(sorted)-1]
	p := declcfg.Package{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: channel, Icon: newest.icon}
	if md, ok := csvMetadata(newest.bundle); ok {
		p.Description = md.Description
	}
	cfg.Packages = []declcfg.Package{p}
	cfg.Channels = []declcfg.Channel{ch}
	if err := ValidateCatalog(*cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ValidateCatalog checks a file-based catalog as `opm validate` does: it
// must convert to opm's model, and the model must be valid (channel
// heads, upgrade graph, bundle properties).
func ValidateCatalog(cfg declcfg.DeclarativeConfig) error {
	m, err := declcfg.ConvertToModel(cfg)
	if err != nil {
		return fmt.Errorf("invalid catalog: %w", err)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("invalid catalog: %w", err)
	}
	return nil
}

// bundleVersion is the version of a bundle's olm.package property.
func bundleVersion(b declcfg.Bundle) (semver.Version, error) {
	props, err := property.Parse(b.Properties)
	if err != nil {
		return semver.Version{}, fmt.Errorf("bundle %s: %w", b.Name, err)
	}
	if len(props.Packages) != 1 {
		return semver.Version{}, fmt.Errorf("bundle %s has %d olm.package properties, want 1", b.Name, len(props.Packages))
	}
	return semver.Parse(props.Packages[0].Version)
}

// csvMetadata is a bundle's olm.csv.metadata property.
func csvMetadata(b declcfg.Bundle) (property.CSVMetadata, bool) {
	props, err := property.Parse(b.Properties)
	if err != nil || len(props.CSVMetadatas) == 0 {
		return property.CSVMetadata{}, false
	}
	return props.CSVMetadatas[0], true
}

// WriteYAML is the catalog as YAML documents, as `opm render -o yaml`
// writes it.
func WriteYAML(cfg declcfg.DeclarativeConfig) ([]byte, error) {
	var buf bytes.Buffer
	if err := declcfg.WriteYAML(cfg, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
