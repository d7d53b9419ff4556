package helmchart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/registry"
	sigsyaml "sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/manifest"
)

// Name is the Helm chart's name; it is pushed to <registry>/charts/<Name>.
const Name = "portico"

// Images are the images a released chart pins: the operator's and each
// controller's, by name (portico-operator, <name>-controller), as
// repository@sha256:… references.
type Images struct {
	Registry string
	Version  string
	// Digests by image name.
	Digests map[string]string
}

// ref is the digest reference of image name.
func (c Images) ref(name string) string {
	return c.Registry + "/" + name + "@" + c.Digests[name]
}

// Package loads the chart at dir, sets its version and appVersion to
// the release version and its default images to the release's digests, and
// returns the chart archive (.tgz). The archive is reproducible: sorted
// entries, fixed modes and times, no gzip timestamp. values.yaml keeps its
// comments: only the image values change.
func Package(dir string, images Images, epoch time.Time) ([]byte, *chart.Chart, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	chrt.Metadata.Version = images.Version
	chrt.Metadata.AppVersion = images.Version
	if err := chrt.Validate(); err != nil {
		return nil, nil, fmt.Errorf("chart version %s: %w", images.Version, err)
	}
	controllers, err := Controllers(chrt)
	if err != nil {
		return nil, nil, err
	}
	values, err := pinnedValues(chrt, images, controllers)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range chrt.Raw {
		if f.Name == chartutil.ValuesfileName {
			f.Data = values
		}
	}
	if chrt.Values, err = chartutil.ReadValues(values); err != nil {
		return nil, nil, err
	}
	archive, err := chartArchive(chrt, epoch)
	if err != nil {
		return nil, nil, err
	}
	// What helm reads back is what we meant to write.
	if _, err := loader.LoadArchive(bytes.NewReader(archive)); err != nil {
		return nil, nil, fmt.Errorf("the packaged chart does not load: %w", err)
	}
	return archive, chrt, nil
}

// Controllers are the controllers the chart knows: the keys of its
// values.controllers, sorted.
func Controllers(chrt *chart.Chart) ([]string, error) {
	table, ok := chrt.Values["controllers"].(map[string]any)
	if !ok || len(table) == 0 {
		return nil, fmt.Errorf("the chart's values have no controllers")
	}
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// ControllerBinary is the image of the chart's controller <name>: the
// contract's binary (<name>-controller; portico-ratelimit-service for the
// rate-limit service).
func ControllerBinary(name string) string {
	if c, ok := contract.ControllerNamed(operatorv1alpha1.ControllerName(name)); ok {
		return c.Binary()
	}
	return name + "-controller"
}

// pinnedValues is the chart's values.yaml with the release's images: the
// operator's repository, tag and digest, the controllers' default registry
// and tag, and every controller's image by digest.
func pinnedValues(chrt *chart.Chart, images Images, controllers []string) ([]byte, error) {
	var raw []byte
	for _, f := range chrt.Raw {
		if f.Name == chartutil.ValuesfileName {
			raw = f.Data
		}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml is not a map")
	}
	top := doc.Content[0]
	set := map[string]string{
		"image.repository":          images.Registry + "/" + contract.OperatorName,
		"image.tag":                 images.Version,
		"image.digest":              images.Digests[contract.OperatorName],
		"controllerImages.registry": images.Registry,
		"controllerImages.tag":      images.Version,
	}
	for _, name := range controllers {
		set["controllers."+name+".image"] = images.ref(ControllerBinary(name))
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := setScalar(top, strings.Split(k, "."), set[k]); err != nil {
			return nil, fmt.Errorf("values.yaml %s: %w", k, err)
		}
		if strings.HasSuffix(k, ".digest") || strings.HasSuffix(k, ".image") {
			if !strings.Contains(set[k], "sha256:") {
				return nil, fmt.Errorf("values.yaml %s: no digest for the image", k)
			}
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// setScalar sets the string at keys below a mapping node; every key must
// exist already (the chart documents each value it takes).
func setScalar(m *yaml.Node, keys []string, value string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != keys[0] {
			continue
		}
		v := m.Content[i+1]
		if len(keys) == 1 {
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s is not a scalar", keys[0])
			}
			v.Value, v.Tag, v.Style = value, "!!str", yaml.DoubleQuotedStyle
			return nil
		}
		if v.Kind != yaml.MappingNode {
			return fmt.Errorf("%s is not a map", keys[0])
		}
		return setScalar(v, keys[1:], value)
	}
	return fmt.Errorf("no key %s", keys[0])
}

// chartArchive writes the chart as `helm package` lays it out (Chart.yaml,
// values.yaml, values.schema.json, templates, files under <name>/), with
// every entry at the epoch.
func chartArchive(chrt *chart.Chart, epoch time.Time) ([]byte, error) {
	if len(chrt.Dependencies()) > 0 {
		return nil, fmt.Errorf("charts with dependencies are not packaged here")
	}
	meta, err := sigsyaml.Marshal(chrt.Metadata)
	if err != nil {
		return nil, err
	}
	type entry struct {
		name string
		data []byte
	}
	base := chrt.Name()
	entries := []entry{{path.Join(base, chartutil.ChartfileName), meta}}
	for _, f := range chrt.Raw {
		if f.Name == chartutil.ValuesfileName {
			entries = append(entries, entry{path.Join(base, chartutil.ValuesfileName), f.Data})
		}
	}
	if chrt.Schema != nil {
		entries = append(entries, entry{path.Join(base, chartutil.SchemafileName), chrt.Schema})
	}
	var rest []entry
	for _, f := range chrt.Templates {
		rest = append(rest, entry{path.Join(base, f.Name), f.Data})
	}
	for _, f := range chrt.Files {
		rest = append(rest, entry{path.Join(base, f.Name), f.Data})
	}
	slices.SortFunc(rest, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	entries = append(entries, rest...)

	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	gz.ModTime = epoch
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)),
			ModTime: epoch, Format: tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Push pushes the chart archive to oci://<repository>:<version> with
// the Helm SDK's registry client and returns the manifest digest. The
// manifest's creation annotation is the epoch, so the digest is
// reproducible. plainHTTP talks HTTP to the registry (a local test
// registry).
func Push(archive []byte, repository, version string, epoch time.Time, plainHTTP bool) (string, error) {
	opts := []registry.ClientOption{}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return "", err
	}
	ref := strings.TrimPrefix(repository, "oci://") + ":" + strings.ReplaceAll(version, "+", "_")
	result, err := client.Push(archive, ref,
		registry.PushOptStrictMode(true),
		registry.PushOptCreationTime(epoch.UTC().Format(time.RFC3339)))
	if err != nil {
		return "", fmt.Errorf("push chart %s: %w", ref, err)
	}
	return result.Manifest.Digest, nil
}

// Render renders the chart as `helm install portico -n namespace`
// does with values (checked against the values schema) and returns the
// rendered manifests by template file name, with the names sorted, NOTES.txt
// and partials left out.
func Render(chrt *chart.Chart, namespace string, values map[string]any) (map[string]string, []string, error) {
	if err := chartutil.ProcessDependenciesWithMerge(chrt, values); err != nil {
		return nil, nil, fmt.Errorf("chart dependencies: %w", err)
	}
	renderValues, err := chartutil.ToRenderValues(chrt, values,
		chartutil.ReleaseOptions{Name: Name, Namespace: namespace, Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities.Copy())
	if err != nil {
		return nil, nil, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(chrt, renderValues)
	if err != nil {
		return nil, nil, fmt.Errorf("render chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return files, names, nil
}

// RenderInstall renders the chart as `helm install portico -n namespace`
// would, CRDs included, and returns one YAML stream for `kubectl apply`:
// the namespace first (with the restricted Pod Security Standard
// enforced), then every object, in the order of the template files.
func RenderInstall(chrt *chart.Chart, namespace string) ([]byte, error) {
	files, names, err := Render(chrt, namespace, map[string]any{})
	if err != nil {
		return nil, err
	}
	// CRDs first, so that `kubectl apply` creates them before anything
	// that may use them.
	slices.SortFunc(names, func(a, b string) int {
		ac, bc := strings.Contains(a, "/crds/"), strings.Contains(b, "/crds/")
		if ac != bc {
			if ac {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var out bytes.Buffer
	fmt.Fprintf(&out, "# Portico %s: `kubectl apply --server-side -f install.yaml`.\n", chrt.Metadata.AppVersion)
	fmt.Fprintf(&out, "# Rendered from the chart %s %s for namespace %s; Helm users: helm install %s oci://<registry>/charts/%s --version %s\n",
		chrt.Name(), chrt.Metadata.Version, namespace, Name, Name, chrt.Metadata.Version)
	fmt.Fprintf(&out, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n"+
		"    pod-security.kubernetes.io/enforce: restricted\n    pod-security.kubernetes.io/enforce-version: latest\n", namespace)
	for _, name := range names {
		docs, err := manifest.Documents([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, doc := range docs {
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, bytes.TrimSpace(bytes.TrimPrefix(doc, []byte("---"))))
		}
	}
	return out.Bytes(), nil
}
