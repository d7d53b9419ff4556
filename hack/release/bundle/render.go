package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/hack/release/helmchart"
	"github.com/portico-dev/portico/internal/manifest"
)

// images names the images of one bundle.
type images struct {
	registry, tag string
	digests       map[string]string
}

func (i images) operator() string { return i.ref(operatorImageName) }

func (i images) controller(name string) string { return i.ref(controllerBinary(name)) }

// ref is <registry>/<image>@<digest> when the image is pinned, else
// <registry>/<image>:<tag>.
func (i images) ref(image string) string {
	if d := i.digests[image]; d != "" {
		return i.registry + "/" + image + "@" + d
	}
	return i.registry + "/" + image + ":" + i.tag
}

// controllerBinary is the binary, image and ServiceAccount of catalog entry
// <name>: the contract's (<name>-controller, portico-ratelimit-service for
// the rate-limit service).
func controllerBinary(name string) string { return helmchart.ControllerBinary(name) }

// relatedImageEnv is the operator's variable that overrides the image of
// controller <name> (OLM convention), RELATED_IMAGE_<BINARY>.
func relatedImageEnv(name string) string {
	return relatedImageEnvPrefix + strings.ToUpper(strings.ReplaceAll(controllerBinary(name), "-", "_"))
}

// chartValues are the values the chart is rendered with: every image at the
// bundle's registry and tag, and every controller image spelt out so that
// the chart passes it to the operator as RELATED_IMAGE_*; the operator
// writing its own NetworkPolicy (operator-controller v1.2.0 refuses a
// bundle with one), and no dashboard ConfigMap (operator-controller renders
// every bundle object as a Helm template, and the dashboard's legends are
// Go templates of Grafana's).
func chartValues(img images, controllers []string) map[string]any {
	perController := map[string]any{}
	for _, name := range controllers {
		perController[name] = map[string]any{"image": img.controller(name)}
	}
	return map[string]any{
		"image": map[string]any{
			"repository": img.registry + "/" + operatorImageName,
			"tag":        img.tag,
			"digest":     img.digests[operatorImageName],
		},
		"controllerImages": map[string]any{
			"registry": img.registry,
			"tag":      img.tag,
		},
		"controllers":   perController,
		"networkPolicy": map[string]any{"byOperator": true},
		"metrics":       map[string]any{"dashboard": map[string]any{"enabled": false}},
	}
}

// renderChart renders the chart as `helm install portico -n <namespace>`
// does (values schema validation included) and returns its objects, in the
// order of the template file names.
func renderChart(chrt *chart.Chart, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	files, names, err := helmchart.Render(chrt, namespace, values)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		objects, err := manifest.Objects([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, objects...)
	}
	return out, nil
}

// crd is one CRD of config/crd/bases, as controller-gen wrote it.
type crd struct {
	*apiextensionsv1.CustomResourceDefinition
	// fileName in the bundle, <group>_<plural>.yaml.
	fileName string
	raw      []byte
}

// served reports whether the CRD serves kind in version.
func (c crd) served(kind, version string) bool {
	return c.Spec.Names.Kind == kind && slices.ContainsFunc(c.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == version && v.Served
	})
}

// readCRDs reads the CRDs controller-gen writes, one per file, sorted by
// name.
func readCRDs(dir string) ([]crd, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no CRDs in %s: run make manifests", dir)
	}
	out := make([]crd, len(paths))
	for i, p := range paths {
		if out[i], err = readCRD(p); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readCRD reads the one CRD of a file, strictly.
func readCRD(path string) (crd, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return crd{}, err
	}
	docs, err := manifest.Documents(raw)
	if err != nil {
		return crd{}, err
	}
	if len(docs) != 1 {
		return crd{}, fmt.Errorf("want one CRD, got %d YAML documents", len(docs))
	}
	c := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(docs[0], c); err != nil {
		return crd{}, err
	}
	if c.Kind != "CustomResourceDefinition" || c.Name != c.Spec.Names.Plural+"."+c.Spec.Group {
		return crd{}, errors.New("want a CustomResourceDefinition named <plural>.<group>")
	}
	return crd{CustomResourceDefinition: c, fileName: c.Spec.Group + "_" + c.Spec.Names.Plural + ".yaml", raw: raw}, nil
}

// readExamples reads the sample objects of config/samples, the alm-examples;
// each of an owned CRD's group must be of its kind and served version. The
// objects the samples need that are not the operator's (Namespace, Service,
// Istio Gateway) are no examples and are left out.
func readExamples(dir string, crds []crd) ([]map[string]any, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		objects, err := manifest.ReadObjects(p)
		if err != nil {
			return nil, err
		}
		for _, u := range objects {
			gvk := u.GroupVersionKind()
			if !slices.ContainsFunc(crds, func(c crd) bool { return c.Spec.Group == gvk.Group }) {
				continue
			}
			if !slices.ContainsFunc(crds, func(c crd) bool { return c.Spec.Group == gvk.Group && c.served(gvk.Kind, gvk.Version) }) {
				return nil, fmt.Errorf("%s: the sample %s %q is not of a CRD in config/crd/bases", p, gvk, u.GetName())
			}
			out = append(out, u.Object)
		}
	}
	return out, nil
}
