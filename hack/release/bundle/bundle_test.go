package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/manifest"
	"github.com/portico-dev/portico/test/testenv"
)

var root = testenv.RepoRoot()

// checkedInDir is the bundle under version control.
var checkedInDir = filepath.Join(root, "bundle")

// olmCSVCRD is OLM's ClusterServiceVersion CRD, beside the repository.
var olmCSVCRD = filepath.Join(root, "..", "shared", "testdata", "olm", "operators.coreos.com_clusterserviceversions.yaml")

// k8sClient reaches an API server with Portico's CRDs and OLM's CSV CRD;
// its writes are strictly validated.
var k8sClient client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		CRDs:            olmCRDs,
		AddToScheme:     []func(*runtime.Scheme) error{authorizationv1.AddToScheme, rbacv1.AddToScheme},
		FieldValidation: metav1.FieldValidationStrict,
		Namespaces:      []string{DefaultNamespace, "mirror-system"},
		Setup: func(_ context.Context, env *testenv.Env) error {
			k8sClient = env.Client
			return nil
		},
	}))
}

// olmCRDs is OLM's CSV CRD.
func olmCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := testenv.ReadCRDs(olmCSVCRD)
	if err != nil {
		return nil, fmt.Errorf("OLM's CSV CRD is expected at ../shared/testdata/olm/ beside the repository: %w", err)
	}
	if len(crds) != 1 {
		return nil, fmt.Errorf("%s: %d CRDs, want 1", olmCSVCRD, len(crds))
	}
	return crds, nil
}

// optionsFor are the options `make bundle` uses, with a version and a
// registry (empty for the defaults).
func optionsFor(version, registry string) Options {
	return Options{
		ChartDir:  filepath.Join(root, "charts", "portico"),
		ConfigDir: filepath.Join(root, "config"),
		Version:   version,
		Registry:  registry,
	}
}

func mustGenerate(g Gomega, o Options) *Bundle {
	b, err := Generate(o)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return b
}

// readBundle reads a bundle directory as Generate returns it.
func readBundle(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := manifest.ReadTree(dir, ownedDirs...)
	if err != nil {
		t.Fatalf("read bundle: %v (run make bundle)", err)
	}
	return files
}

// parseCSV decodes the CSV of a bundle, rejecting unknown fields.
func parseCSV(g Gomega, files map[string][]byte) *clusterServiceVersionObject {
	raw, ok := files[csvFile]
	g.ExpectWithOffset(1, ok).To(BeTrue(), "the bundle has no %s", csvFile)
	csv := &clusterServiceVersionObject{}
	g.ExpectWithOffset(1, yaml.UnmarshalStrict(raw, csv)).To(Succeed())
	return csv
}

func asJSON(g Gomega, v any) string {
	raw, err := json.Marshal(v)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(raw)
}

// operatorDeploymentSpec decodes the CSV's one Deployment strictly.
func operatorDeploymentSpec(g Gomega, csv *clusterServiceVersionObject) *appsv1.DeploymentSpec {
	g.ExpectWithOffset(1, csv.Spec.Install.Spec.Deployments).To(HaveLen(1))
	raw, err := json.Marshal(csv.Spec.Install.Spec.Deployments[0].Spec)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	spec := &appsv1.DeploymentSpec{}
	g.ExpectWithOffset(1, yaml.UnmarshalStrict(raw, spec)).To(Succeed())
	return spec
}

// configCRDs are the CRDs controller-gen writes, by file.
func configCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, p := range paths {
		crds, err := testenv.ReadCRDs(p)
		if err != nil || len(crds) != 1 {
			t.Fatalf("%s: want one CRD: %v", p, err)
		}
		out[p] = crds[0]
	}
	return out
}

// chartControllerNames are the controllers in the chart's values.
func chartControllerNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "charts", "portico", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Controllers map[string]any `json:"controllers"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range values.Controllers {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("the chart's values have no controllers")
	}
	return names
}

// (e) The checked-in bundle is what `make bundle` generates now.
func TestCheckedInBundleIsUpToDate(t *testing.T) {
	g := NewWithT(t)
	fresh := mustGenerate(g, optionsFor("", ""))
	onDisk := readBundle(t, checkedInDir)

	var names []string
	for name := range fresh.Files {
		names = append(names, name)
	}
	for name := range onDisk {
		if _, ok := fresh.Files[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		g.Expect(string(onDisk[name])).To(Equal(string(fresh.Files[name])),
			"bundle/%s differs from a fresh generation: run make bundle and commit bundle/", name)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "bundle.Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred(), "run make bundle")
	g.Expect(string(dockerfile)).To(Equal(string(fresh.Dockerfile)),
		"bundle.Dockerfile differs from a fresh generation: run make bundle and commit it")
	g.Expect(fresh.Warnings).To(BeEmpty())
}

// Generating twice gives the same bytes (maps, sorting, no timestamps).
func TestGenerationIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	first := mustGenerate(g, optionsFor("v1.2.3", "quay.io/mirror"))
	for range 3 {
		again := mustGenerate(g, optionsFor("v1.2.3", "quay.io/mirror"))
		g.Expect(again.Files).To(Equal(first.Files))
		g.Expect(again.Dockerfile).To(Equal(first.Dockerfile))
	}
}

// Write produces the files Generate returns and removes stale ones.
func TestWrite(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "bundle")
	stale := filepath.Join(out, "manifests", "gone_v1_service.yaml")
	g.Expect(os.MkdirAll(filepath.Dir(stale), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(stale, []byte("stale"), 0o644)).To(Succeed())
	keep := filepath.Join(out, "README.md") // not in a directory the generator owns
	g.Expect(os.WriteFile(keep, []byte("mine"), 0o644)).To(Succeed())

	b := mustGenerate(g, optionsFor("", ""))
	g.Expect(b.Write(out, filepath.Join(dir, "bundle.Dockerfile"))).To(Succeed())
	g.Expect(readBundle(t, out)).To(Equal(b.Files))
	g.Expect(stale).NotTo(BeAnExistingFile())
	g.Expect(keep).To(BeAnExistingFile())
	dockerfile, err := os.ReadFile(filepath.Join(dir, "bundle.Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dockerfile).To(Equal(b.Dockerfile))
}

// (a) A real API server with OLM's ClusterServiceVersion CRD accepts the
// checked-in CSV and bundles of other versions and registries, with strict
// field validation (an unknown field is an error, not silently pruned);
// the other manifests and the alm-examples are accepted too.
func TestAPIServerAcceptsBundle(t *testing.T) {
	c := k8sClient
	ctx := context.Background()

	create := func(g Gomega, namespace string, raw []byte) *unstructured.Unstructured {
		var object map[string]any
		g.ExpectWithOffset(1, yaml.Unmarshal(raw, &object)).To(Succeed())
		u := &unstructured.Unstructured{Object: object}
		if namespace != "" {
			u.SetNamespace(namespace)
		}
		sent := u.DeepCopy()
		g.ExpectWithOffset(1, c.Create(ctx, u)).To(Succeed(), "%s %s is rejected", u.GetKind(), u.GetName())
		// Nothing was dropped or defaulted away.
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		g.ExpectWithOffset(1, c.Get(ctx, client.ObjectKeyFromObject(u), got)).To(Succeed())
		if u.GetKind() == "ClusterServiceVersion" {
			g.ExpectWithOffset(1, asJSON(g, got.Object["spec"])).To(MatchJSON(asJSON(g, sent.Object["spec"])),
				"the API server changed the CSV's spec")
		}
		return got
	}

	t.Run("checked-in bundle", func(t *testing.T) {
		g := NewWithT(t)
		files := readBundle(t, checkedInDir)
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		crds := 0
		for _, name := range names {
			if !strings.HasPrefix(name, "manifests/") {
				continue
			}
			var meta metav1.TypeMeta
			g.Expect(yaml.Unmarshal(files[name], &meta)).To(Succeed())
			if meta.Kind == "CustomResourceDefinition" {
				crds++ // installed by envtest from config/crd/bases, the same but the keep annotation (TestOwnedCRDs)
				continue
			}
			got := create(g, DefaultNamespace, files[name])
			g.Expect(got.GetNamespace()).To(Equal(DefaultNamespace))
		}
		g.Expect(crds).To(Equal(len(configCRDs(t))))
	})

	t.Run("alm-examples", func(t *testing.T) {
		g := NewWithT(t)
		csv := parseCSV(g, readBundle(t, checkedInDir))
		var examples []map[string]any
		g.Expect(json.Unmarshal([]byte(csv.Metadata.Annotations["alm-examples"]), &examples)).To(Succeed())
		g.Expect(examples).NotTo(BeEmpty())
		for _, example := range examples {
			u := &unstructured.Unstructured{Object: example}
			if ns := u.GetNamespace(); ns != "" {
				err := c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
				}})
				g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
			}
			g.Expect(c.Create(ctx, u)).To(Succeed(), "the example %s %s is rejected", u.GetKind(), u.GetName())
		}
	})

	for _, tc := range []struct{ name, version, registry string }{
		{name: "release", version: "v1.2.3", registry: "quay.io/mirror/portico"},
		{name: "prerelease", version: "2.0.0-rc.1"},
		{name: "untagged commit", version: "4ae30bf-dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := mustGenerate(g, optionsFor(tc.version, tc.registry))
			got := create(g, "mirror-system", b.Files[csvFile])
			g.Expect(got.GetName()).To(Equal("portico.v" + b.Version))
		})
	}
}

// The CSV's identity and the fields the contract names.
func TestCSVMetadata(t *testing.T) {
	g := NewWithT(t)
	csv := parseCSV(g, readBundle(t, checkedInDir))

	g.Expect(csv.APIVersion).To(Equal("operators.coreos.com/v1alpha1"))
	g.Expect(csv.Kind).To(Equal("ClusterServiceVersion"))
	g.Expect(csv.Metadata.Name).To(Equal("portico.v" + csv.Spec.Version))
	g.Expect(csv.Spec.DisplayName).To(Equal("Portico"))
	g.Expect(csv.Spec.Description).NotTo(BeEmpty())
	g.Expect(csv.Spec.Maturity).To(Equal("alpha"))
	g.Expect(csv.Spec.MinKubeVersion).To(MatchRegexp(`^1\.[0-9]+\.[0-9]+$`))
	g.Expect(csv.Spec.Provider.Name).NotTo(BeEmpty())
	g.Expect(csv.Spec.Keywords).NotTo(BeEmpty())
	g.Expect(csv.Spec.Links).NotTo(BeEmpty())
	g.Expect(csv.Spec.Maintainers).NotTo(BeEmpty())
	g.Expect(csv.Spec.Install.Strategy).To(Equal("deployment"))
	g.Expect(csv.Metadata.Annotations).To(HaveKeyWithValue("operatorframework.io/suggested-namespace", DefaultNamespace))
	g.Expect(csv.Metadata.Annotations).NotTo(HaveKey("createdAt"), "a timestamp would make every generation differ")

	modes := map[string]bool{}
	for _, m := range csv.Spec.InstallModes {
		modes[string(m.Type)] = m.Supported
	}
	g.Expect(modes).To(Equal(map[string]bool{
		"OwnNamespace": true, "SingleNamespace": false, "MultiNamespace": false, "AllNamespaces": true,
	}), "OwnNamespace for OLM v0, AllNamespaces for OLM v1 (operator-controller v1.2.0 installs no other mode)")

	// The checked-in bundle is the chart's appVersion.
	chart, err := os.ReadFile(filepath.Join(root, "charts", "portico", "Chart.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	g.Expect(yaml.Unmarshal(chart, &meta)).To(Succeed())
	g.Expect("v" + csv.Spec.Version).To(Equal("v" + strings.TrimPrefix(meta.AppVersion, "v")))
	g.Expect(csv.Metadata.Annotations["containerImage"]).To(Equal(DefaultRegistry + "/portico-operator:" + meta.AppVersion))
}

// The bundle version follows the operator version; images keep its tag.
func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		name, version, registry        string
		wantVersion, wantTag, wantRepo string
		wantWarning                    bool
	}{
		{name: "release with v", version: "v1.2.3", wantVersion: "1.2.3", wantTag: "v1.2.3", wantRepo: DefaultRegistry},
		{name: "release without v", version: "1.2.3", wantVersion: "1.2.3", wantTag: "1.2.3", wantRepo: DefaultRegistry},
		{name: "prerelease", version: "v2.0.0-rc.1", registry: "quay.io/mirror/", wantVersion: "2.0.0-rc.1", wantTag: "v2.0.0-rc.1", wantRepo: "quay.io/mirror"},
		{name: "git describe after a tag", version: "v0.1.0-3-g4ae30bf-dirty", wantVersion: "0.1.0-3-g4ae30bf-dirty", wantTag: "v0.1.0-3-g4ae30bf-dirty", wantRepo: DefaultRegistry},
		{name: "git describe without tags", version: "4ae30bf", wantVersion: DevVersion, wantTag: "4ae30bf", wantRepo: DefaultRegistry, wantWarning: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := mustGenerate(g, optionsFor(tc.version, tc.registry))
			g.Expect(b.Version).To(Equal(tc.wantVersion))
			g.Expect(b.Warnings).To(HaveLen(map[bool]int{false: 0, true: 1}[tc.wantWarning]))
			csv := parseCSV(g, b.Files)
			g.Expect(csv.Metadata.Name).To(Equal("portico.v" + tc.wantVersion))
			g.Expect(csv.Spec.Version).To(Equal(tc.wantVersion))

			spec := operatorDeploymentSpec(g, csv)
			manager := spec.Template.Spec.Containers[0]
			g.Expect(manager.Image).To(Equal(tc.wantRepo + "/portico-operator:" + tc.wantTag))
			g.Expect(manager.Args).To(ContainElements(
				"--controller-image-registry="+tc.wantRepo,
				"--controller-image-tag="+tc.wantTag,
			))
			for _, image := range csv.Spec.RelatedImages {
				g.Expect(image.Image).To(HavePrefix(tc.wantRepo + "/"))
				g.Expect(image.Image).To(HaveSuffix(":" + tc.wantTag))
			}
			g.Expect(spec.Template.Labels).To(HaveKeyWithValue("app.kubernetes.io/version", tc.wantTag))
		})
	}

	t.Run("build metadata", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Generate(optionsFor("v1.2.3+build.7", ""))
		g.Expect(err).To(MatchError(ContainSubstring("not a valid object name")))
	})
}

// (b) Every CRD of config/crd/bases is owned, with every served version,
// and copied into bundle/manifests with the annotation
// helm.sh/resource-policy: keep and nothing else changed: OLM v1 keeps the
// CRDs, and so every APIRule and RateLimit, when its ClusterExtension is
// deleted.
func TestOwnedCRDs(t *testing.T) {
	files := readBundle(t, checkedInDir)
	csv := parseCSV(NewWithT(t), files)
	crds := configCRDs(t)

	var wantOwned []v1alpha1.CRDDescription
	for path, crd := range crds {
		t.Run(crd.Name, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			name := "manifests/" + crd.Spec.Group + "_" + crd.Spec.Names.Plural + ".yaml"
			g.Expect(files).To(HaveKey(name))
			var inBundle, inConfig map[string]any
			g.Expect(yaml.Unmarshal(files[name], &inBundle)).To(Succeed())
			g.Expect(yaml.Unmarshal(raw, &inConfig)).To(Succeed())
			kept := &unstructured.Unstructured{Object: inBundle}
			g.Expect(kept.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
			annotations := kept.GetAnnotations()
			delete(annotations, "helm.sh/resource-policy")
			kept.SetAnnotations(annotations)
			g.Expect(kept.Object).To(Equal(inConfig), "%s is config/crd/bases's CRD with more than the keep annotation", name)

			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				var owned *v1alpha1.CRDDescription
				for i, o := range csv.Spec.CustomResourceDefinitions.Owned {
					if o.Name == crd.Name && o.Version == v.Name {
						owned = &csv.Spec.CustomResourceDefinitions.Owned[i]
					}
				}
				g.Expect(owned).NotTo(BeNil(), "%s/%s is not in spec.customresourcedefinitions.owned", crd.Name, v.Name)
				g.Expect(owned.Kind).To(Equal(crd.Spec.Names.Kind))
				g.Expect(owned.DisplayName).NotTo(BeEmpty())
				g.Expect(owned.Description).NotTo(BeEmpty())
				g.Expect(strings.Fields(owned.Description)).To(Equal(strings.Fields(v.Schema.OpenAPIV3Schema.Description)),
					"the description is the schema's")
				wantOwned = append(wantOwned, *owned)
			}
		})
	}
	NewWithT(t).Expect(csv.Spec.CustomResourceDefinitions.Owned).To(ConsistOf(wantOwned), "owned CRDs that are not in config/crd/bases")

	// The CSV names the kinds the contract names.
	var kinds []string
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		kinds = append(kinds, o.Kind)
	}
	NewWithT(t).Expect(kinds).To(ContainElements("APIGateway", "APIRule", "RateLimit"))
}

// The alm-examples are the samples in config/samples of Portico's own API
// groups, each of an owned kind.
func TestALMExamples(t *testing.T) {
	g := NewWithT(t)
	csv := parseCSV(g, readBundle(t, checkedInDir))
	var examples []map[string]any
	g.Expect(json.Unmarshal([]byte(csv.Metadata.Annotations["alm-examples"]), &examples)).To(Succeed())

	paths, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var want []map[string]any
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		objects, err := manifest.ReadObjects(p)
		g.Expect(err).NotTo(HaveOccurred())
		for _, u := range objects {
			if !strings.HasSuffix(u.GroupVersionKind().Group, ".portico.dev") {
				continue // the samples' prerequisites: Namespace, Service, Istio Gateway
			}
			want = append(want, u.Object)
		}
	}
	g.Expect(examples).To(Equal(want))

	for _, example := range examples {
		u := unstructured.Unstructured{Object: example}
		g.Expect(csv.Spec.CustomResourceDefinitions.Owned).To(ContainElement(And(
			HaveField("Kind", u.GetKind()),
			HaveField("Version", u.GroupVersionKind().Version),
			HaveField("Name", HaveSuffix("."+u.GroupVersionKind().Group)),
		)), "the example %s %s is not of an owned CRD", u.GetKind(), u.GetName())
	}
	g.Expect(examples).To(ContainElement(HaveKeyWithValue("kind", "APIGateway")))
}

// (c) Every image the CSV refers to is in spec.relatedImages, and every
// controller's image is passed to the operator as RELATED_IMAGE_*.
func TestRelatedImages(t *testing.T) {
	controllers := chartControllerNames(t)
	for _, tc := range []struct {
		name, version, registry string
		files                   func(*testing.T) map[string][]byte
	}{
		{name: "checked-in", files: func(t *testing.T) map[string][]byte { return readBundle(t, checkedInDir) }},
		{name: "mirror registry", version: "v1.2.3", registry: "registry.internal:5000/mirror"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var files map[string][]byte
			if tc.files != nil {
				files = tc.files(t)
			} else {
				files = mustGenerate(g, optionsFor(tc.version, tc.registry)).Files
			}
			csv := parseCSV(g, files)

			related := map[string]string{}
			for _, image := range csv.Spec.RelatedImages {
				g.Expect(related).NotTo(HaveKey(image.Name), "relatedImages has %s twice", image.Name)
				related[image.Name] = image.Image
			}
			relatedRefs := slices.Collect(maps.Values(related))

			// Every image anywhere in the CSV: containers, RELATED_IMAGE_*,
			// the containerImage annotation.
			var referenced []string
			var walk func(v any, key string)
			walk = func(v any, key string) {
				switch v := v.(type) {
				case map[string]any:
					if name, ok := v["name"].(string); ok && strings.HasPrefix(name, relatedImageEnvPrefix) {
						referenced = append(referenced, v["value"].(string))
					}
					for k, child := range v {
						walk(child, k)
					}
				case []any:
					for _, child := range v {
						walk(child, key)
					}
				case string:
					if key == "image" {
						referenced = append(referenced, v)
					}
				}
			}
			var object map[string]any
			g.Expect(yaml.Unmarshal(files[csvFile], &object)).To(Succeed())
			spec := object["spec"].(map[string]any)
			walk(spec["install"], "install")
			referenced = append(referenced, csv.Metadata.Annotations["containerImage"])
			g.Expect(referenced).NotTo(BeEmpty())
			for _, ref := range referenced {
				g.Expect(relatedRefs).To(ContainElement(ref), "%s is not in spec.relatedImages", ref)
			}

			// The operator and every controller of the chart, by name.
			deployment := operatorDeploymentSpec(g, csv)
			manager := deployment.Template.Spec.Containers[0]
			g.Expect(related).To(HaveKeyWithValue("portico-operator", manager.Image))
			env := map[string]string{}
			for _, e := range manager.Env {
				env[e.Name] = e.Value
			}
			wantNames := []string{"portico-operator"}
			for _, name := range controllers {
				binary := controllerBinary(name)
				wantNames = append(wantNames, binary)
				g.Expect(related).To(HaveKey(binary))
				g.Expect(related[binary]).To(MatchRegexp(`/%s:[^/]+$`, binary))
				envName := "RELATED_IMAGE_" + strings.ToUpper(strings.ReplaceAll(binary, "-", "_"))
				g.Expect(env).To(HaveKeyWithValue(envName, related[binary]), "the operator gets no %s", envName)
			}
			g.Expect(related).To(HaveLen(len(wantNames)), "relatedImages: %v", related)
			if tc.registry != "" {
				for _, ref := range related {
					g.Expect(ref).To(HavePrefix(tc.registry + "/"))
				}
			}
		})
	}
}

// (d) Each ServiceAccount gets exactly the rules controller-gen generated
// into config/rbac, and none wider: ClusterRole rules as clusterPermissions,
// with the rules of the operator's Role in namespace default (the API
// server's EndpointSlice) after the ClusterRole's (OLM creates a bundle's
// namespaced objects in the install namespace only); Role rules as Roles of
// the bundle, bound by RoleBindings whose ServiceAccount subject names no
// namespace (the RoleBinding's own). The CSV has no permissions, which
// OLM v0 in AllNamespaces mode and OLM v1 always would make cluster-wide
// (strict parsing refuses the field); a ServiceAccount without cluster
// rules has a clusterPermissions entry without rules, so OLM creates it.
func TestPermissionsMatchConfigRBAC(t *testing.T) {
	files := readBundle(t, checkedInDir)
	csv := parseCSV(NewWithT(t), files)
	gotCluster := map[string][]rbacv1.PolicyRule{}
	for _, p := range csv.Spec.Install.Spec.ClusterPermissions {
		NewWithT(t).Expect(gotCluster).NotTo(HaveKey(p.ServiceAccountName), "%s is listed twice", p.ServiceAccountName)
		gotCluster[p.ServiceAccountName] = p.Rules
	}
	gotRoles := map[string]rbacv1.Role{}
	gotBindings := map[string]rbacv1.RoleBinding{}
	for name, raw := range files {
		switch {
		case strings.HasSuffix(name, "_rbac.authorization.k8s.io_v1_role.yaml"):
			var role rbacv1.Role
			NewWithT(t).Expect(yaml.UnmarshalStrict(raw, &role)).To(Succeed())
			gotRoles[role.Name] = role
		case strings.HasSuffix(name, "_rbac.authorization.k8s.io_v1_rolebinding.yaml"):
			var binding rbacv1.RoleBinding
			NewWithT(t).Expect(yaml.UnmarshalStrict(raw, &binding)).To(Succeed())
			gotBindings[binding.Name] = binding
		case strings.Contains(name, "_rbac.authorization.k8s.io_"):
			t.Errorf("%s: the bundle carries Roles and RoleBindings only; OLM creates the ClusterRoles", name)
		}
	}

	paths, err := filepath.Glob(filepath.Join(root, "config", "rbac", "*", "role.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no config/rbac/*/role.yaml: %v", err)
	}
	wantCluster := map[string][]rbacv1.PolicyRule{}
	wantRoles := map[string][]rbacv1.PolicyRule{}
	for _, path := range paths {
		dir := filepath.Base(filepath.Dir(path))
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			docs, err := manifest.Documents(raw)
			g.Expect(err).NotTo(HaveOccurred())
			for _, doc := range docs {
				var role rbacv1.ClusterRole
				g.Expect(yaml.Unmarshal(doc, &role)).To(Succeed())
				// The chart binds <name> to the ServiceAccount <name>:
				// portico-operator, <controller>-controller.
				sa := role.Name
				if wantCluster[sa] == nil {
					wantCluster[sa] = []rbacv1.PolicyRule{}
				}
				switch {
				case role.Kind == "ClusterRole":
					wantCluster[sa] = append(role.Rules, wantCluster[sa]...)
				case role.Kind == "Role" && role.Namespace == apiServerNamespace:
					g.Expect(sa).To(Equal("portico-operator"), "only the operator reads namespace default")
					wantCluster[sa] = append(wantCluster[sa], role.Rules...)
				case role.Kind == "Role":
					wantRoles[sa] = role.Rules
					g.Expect(gotRoles).To(HaveKey(sa), "the bundle has no Role %s", sa)
					g.Expect(gotRoles[sa].Rules).To(Equal(role.Rules), "the rules of Role %s", sa)
					g.Expect(gotRoles[sa].Namespace).To(BeEmpty(), "OLM creates it in the install namespace")
					g.Expect(gotBindings).To(HaveKey(sa), "the bundle has no RoleBinding %s", sa)
					g.Expect(gotBindings[sa].Namespace).To(BeEmpty(), "OLM creates it in the install namespace")
					g.Expect(gotBindings[sa].RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}))
					g.Expect(gotBindings[sa].Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa}}),
						"the subject names no namespace: the RoleBinding's own, wherever OLM creates it")
				default:
					t.Fatalf("unexpected %s in %s", role.Kind, path)
				}
			}
		})
	}
	g := NewWithT(t)
	g.Expect(gotCluster["portico-operator"]).To(ContainElement(rbacv1.PolicyRule{
		APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, ResourceNames: []string{"kubernetes"},
		Verbs: []string{"get", "list", "watch"},
	}), "the operator reads the API server's EndpointSlice (kubernetes, in any namespace: OLM cannot say default), read-only")
	g.Expect(gotCluster).To(Equal(wantCluster), "clusterPermissions that config/rbac does not grant")
	g.Expect(gotRoles).To(HaveLen(len(wantRoles)), "Roles that config/rbac does not have")
	g.Expect(gotBindings).To(HaveLen(len(wantRoles)), "RoleBindings that config/rbac does not have")

	// The contract's ServiceAccounts, the operator's first; the rate-limit
	// service has namespaced rules only, and an entry without rules so
	// that OLM creates its ServiceAccount.
	wantSAs := []string{"portico-operator"}
	for _, name := range chartControllerNames(t) {
		wantSAs = append(wantSAs, controllerBinary(name))
	}
	g.Expect(slices.Collect(maps.Keys(gotCluster))).To(ConsistOf(wantSAs))
	g.Expect(gotCluster["portico-ratelimit-service"]).To(BeEmpty())
	g.Expect(gotRoles).To(HaveKey("portico-ratelimit-service"))
	g.Expect(csv.Spec.Install.Spec.ClusterPermissions[0].ServiceAccountName).To(Equal("portico-operator"))
	g.Expect(string(files[csvFile])).NotTo(ContainSubstring("permissions:\n      - rules"), "the CSV has no namespaced permissions")
}

// The operator's namespaced rules reach only the namespace OLM installs
// the bundle's RoleBindings in: Kubernetes reads a ServiceAccount subject
// without a namespace as one of the RoleBinding's own namespace (RBAC's
// appliesToUser). Proven with the API server's own authorizer: the
// bundle's Role and RoleBinding of the operator, created in one namespace
// as OLM does, grant the ServiceAccount portico-operator of that namespace
// its rules there, and nothing to a ServiceAccount of the same name in
// another namespace, nor anything in another namespace.
func TestRoleBindingSubjectsAreTheInstallNamespaces(t *testing.T) {
	ctx := context.Background()
	files := readBundle(t, checkedInDir)
	const install, other = "olm-install", "olm-elsewhere"
	for _, ns := range []string{install, other} {
		NewWithT(t).Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, kind := range []string{"role", "rolebinding"} {
		var object map[string]any
		NewWithT(t).Expect(yaml.Unmarshal(files["manifests/portico-operator_rbac.authorization.k8s.io_v1_"+kind+".yaml"], &object)).To(Succeed())
		u := &unstructured.Unstructured{Object: object}
		u.SetNamespace(install) // as both OLMs do
		NewWithT(t).Expect(k8sClient.Create(ctx, u)).To(Succeed())
	}
	allowed := func(g Gomega, serviceAccountNamespace, namespace string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + serviceAccountNamespace + ":portico-operator",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + serviceAccountNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "get", Resource: "secrets",
			},
		}}
		g.Expect(k8sClient.Create(ctx, review)).To(Succeed())
		return review.Status.Allowed
	}
	// The authorizer's caches see the new binding in a moment.
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(allowed(g, install, install)).To(BeTrue(), "the install namespace's ServiceAccount is not granted its Role")
	}, 10*time.Second).Should(Succeed())
	g := NewWithT(t)
	g.Expect(allowed(g, other, install)).To(BeFalse(), "a ServiceAccount of another namespace is granted the operator's Role")
	g.Expect(allowed(g, install, other)).To(BeFalse(), "the operator's Role reaches another namespace")
	g.Expect(allowed(g, other, other)).To(BeFalse())
}

// The install strategy is the chart's operator Deployment.
func TestOperatorDeployment(t *testing.T) {
	g := NewWithT(t)
	csv := parseCSV(g, readBundle(t, checkedInDir))
	g.Expect(csv.Spec.Install.Spec.Deployments[0].Name).To(Equal("portico-operator"))
	spec := operatorDeploymentSpec(g, csv)

	g.Expect(spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(spec.Template.Spec.ServiceAccountName).To(Equal("portico-operator"))
	selector, err := metav1.LabelSelectorAsSelector(spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Matches(labels.Set(spec.Template.Labels))).To(BeTrue(), "the selector does not match the pods")

	for _, labels := range []map[string]string{csv.Spec.Install.Spec.Deployments[0].Label, spec.Template.Labels} {
		g.Expect(labels).NotTo(HaveKey("helm.sh/chart"))
		g.Expect(labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "olm"))
		g.Expect(labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", "portico"))
	}
	g.Expect(spec.Template.Spec.Containers).To(HaveLen(1))
	manager := spec.Template.Spec.Containers[0]
	g.Expect(manager.Env).To(ContainElement(corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
	}}), "the operator finds its namespace through the downward API")
	g.Expect(manager.Env).To(ContainElement(corev1.EnvVar{Name: "PORTICO_MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{
		ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "manager", Resource: "limits.memory", Divisor: resource.MustParse("1")},
	}}), "the operator bounds its heap by its container's memory limit")
	g.Expect(manager.SecurityContext).NotTo(BeNil())
	g.Expect(manager.ReadinessProbe).NotTo(BeNil())

	// The install mode changes nothing the operator does: it reads neither
	// OLM's olm.targetNamespaces annotation nor a watch namespace.
	for _, e := range manager.Env {
		g.Expect(e.Name).NotTo(Equal("WATCH_NAMESPACE"))
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			g.Expect(e.ValueFrom.FieldRef.FieldPath).NotTo(ContainSubstring("olm.targetNamespaces"))
		}
	}
	g.Expect(strings.Join(manager.Args, " ")).NotTo(ContainSubstring("targetNamespaces"))
}

// The bundle carries no NetworkPolicy (operator-controller v1.2.0 refuses
// the kind) and no dashboard ConfigMap (its Grafana legends are template
// actions to the Helm chart operator-controller makes of a bundle): the
// operator writes its own NetworkPolicy, with the chart's default values.
func TestOperatorWritesItsOwnNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	files := readBundle(t, checkedInDir)
	for name := range files {
		g.Expect(name).NotTo(ContainSubstring("networkpolicy"))
		g.Expect(name).NotTo(HaveSuffix("_v1_configmap.yaml"))
	}
	manager := operatorDeploymentSpec(g, parseCSV(g, files)).Template.Spec.Containers[0]
	var own []string
	for _, arg := range manager.Args {
		if strings.HasPrefix(arg, "--own-network-policy") {
			own = append(own, arg)
		}
	}
	g.Expect(own).To(Equal([]string{"--own-network-policy", "--own-network-policy-api-server-ports=443,6443"}))
}

// OLM v1 (operator-controller v1.2.0) installs only what operator-registry
// v1.50.0's bundle.IsSupported admits, and renders every object as a Helm
// template: the bundle holds only those kinds, and no "{{" anywhere.
func TestOLMv1AcceptsTheObjects(t *testing.T) {
	// operator-registry v1.50.0, pkg/lib/bundle/supported_resources.go.
	supported := []string{
		"ClusterServiceVersion", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Service",
		"ServiceAccount", "Role", "RoleBinding", "PrometheusRule", "ServiceMonitor", "Secret", "ConfigMap",
		"PodDisruptionBudget", "PriorityClass", "VerticalPodAutoscaler", "ConsoleYAMLSample", "ConsoleQuickStart",
		"ConsoleCLIDownload", "ConsoleLink",
	}
	g := NewWithT(t)
	for name, raw := range readBundle(t, checkedInDir) {
		g.Expect(string(raw)).NotTo(ContainSubstring("{{"), "%s would be a Helm template action to OLM v1", name)
		if !strings.HasPrefix(name, "manifests/") {
			continue
		}
		var meta metav1.TypeMeta
		g.Expect(yaml.Unmarshal(raw, &meta)).To(Succeed())
		g.Expect(supported).To(ContainElement(meta.Kind), "%s: OLM v1 refuses a bundle with a %s", name, meta.Kind)
	}

	err := templateMarkers(map[string][]byte{"manifests/a.yaml": []byte("legend: '{{controller}}'"), "manifests/b.yaml": []byte("x: y")})
	g.Expect(err).To(MatchError(ContainSubstring("manifests/a.yaml hold")))
}

// metadata/annotations.yaml and bundle.Dockerfile describe the same bundle.
func TestAnnotationsAndDockerfile(t *testing.T) {
	g := NewWithT(t)
	files := readBundle(t, checkedInDir)
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	g.Expect(yaml.UnmarshalStrict(files[annotationsFile], &annotations)).To(Succeed())
	const prefix = "operators.operatorframework.io.bundle."
	g.Expect(annotations.Annotations).To(Equal(map[string]string{
		prefix + "mediatype.v1":       "registry+v1",
		prefix + "manifests.v1":       "manifests/",
		prefix + "metadata.v1":        "metadata/",
		prefix + "package.v1":         "portico",
		prefix + "channels.v1":        "stable",
		prefix + "channel.default.v1": "stable",
	}))

	raw, err := os.ReadFile(filepath.Join(root, "bundle.Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	var from []string
	labels := map[string]string{}
	var copies []string
	for _, line := range strings.Split(string(raw), "\n") {
		switch fields := strings.Fields(line); {
		case len(fields) == 0 || strings.HasPrefix(fields[0], "#"):
		case fields[0] == "FROM":
			from = append(from, strings.Join(fields[1:], " "))
		case fields[0] == "LABEL":
			for _, kv := range fields[1:] {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = v
			}
		case fields[0] == "COPY":
			copies = append(copies, strings.Join(fields[1:], " "))
		default:
			t.Errorf("unexpected Dockerfile instruction %q", line)
		}
	}
	g.Expect(from).To(Equal([]string{"scratch"}))
	g.Expect(labels).To(Equal(annotations.Annotations))
	g.Expect(copies).To(ConsistOf("bundle/manifests /manifests/", "bundle/metadata /metadata/"))
}

// A chart that renders something a bundle cannot carry fails the
// generation instead of dropping it.
func TestUnknownRenderedKindFails(t *testing.T) {
	g := NewWithT(t)
	objects := []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate", "namespace": DefaultNamespace},
	}}}
	_, err := fromManifests(objects, DefaultNamespace, images{registry: DefaultRegistry, tag: "v1"}, nil, nil)
	g.Expect(err).To(MatchError(ContainSubstring("Job migrate")))
}

// A Role and RoleBinding in namespace default become clusterPermissions
// (OLM would create them in the install namespace); in the release
// namespace they become manifests; in any other namespace they fail the
// generation.
func TestRBACOutsideTheReleaseNamespace(t *testing.T) {
	object := func(kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": namespace},
		}}
		for k, v := range fields {
			u.Object[k] = v
		}
		return u
	}
	rendered := func(roleNamespace string) []*unstructured.Unstructured {
		rules := []any{map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": []any{"get"}}}
		return []*unstructured.Unstructured{
			{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "op", "namespace": DefaultNamespace}}},
			object("Role", roleNamespace, "op-endpoints", map[string]any{"rules": rules}),
			object("RoleBinding", roleNamespace, "op-endpoints", map[string]any{
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op-endpoints"},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "op", "namespace": DefaultNamespace}},
			}),
		}
	}
	g := NewWithT(t)
	r, err := sortRendered(rendered("default"), DefaultNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, namespaced, err := r.rbacByServiceAccount(DefaultNamespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(namespaced).To(BeEmpty())
	g.Expect(cluster).To(Equal(map[string][]rbacv1.PolicyRule{
		"op": {{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get"}}},
	}))

	// In the release namespace they become manifests, the subject's
	// namespace dropped, and the ServiceAccount an entry without rules.
	r, err = sortRendered(rendered(DefaultNamespace), DefaultNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, namespaced, err = r.rbacByServiceAccount(DefaultNamespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster).To(Equal(map[string][]rbacv1.PolicyRule{"op": {}}))
	g.Expect(namespaced).To(HaveLen(2))
	g.Expect(namespaced[1].Object["subjects"]).To(Equal([]any{map[string]any{"kind": "ServiceAccount", "name": "op"}}))

	_, err = sortRendered(rendered("kube-system"), DefaultNamespace)
	g.Expect(err).To(MatchError(ContainSubstring("the chart renders Role op-endpoints in namespace kube-system")))

	_, err = fromManifests(nil, "default", images{registry: DefaultRegistry, tag: "v1"}, nil, nil)
	g.Expect(err).To(MatchError(ContainSubstring("render the chart for another namespace than default")))
}

func TestHelpers(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		{"APIGateway", "API Gateway"},
		{"APIRule", "API Rule"},
		{"RateLimit", "Rate Limit"},
		{"Gateway", "Gateway"},
		{"HTTPRouteFilter", "HTTP Route Filter"},
	} {
		t.Run(fmt.Sprintf("displayName %s", tc.kind), func(t *testing.T) {
			NewWithT(t).Expect(displayName(tc.kind)).To(Equal(tc.want))
		})
	}
	for _, tc := range []struct{ ref, want string }{
		{"ghcr.io/portico-dev/portico-operator:v0.1.0", "portico-operator"},
		{"registry.internal:5000/mirror/apirule-controller:v1", "apirule-controller"},
		{"quay.io/x/ratelimit-controller@sha256:0123", "ratelimit-controller"},
		{"registry.internal:5000/ratelimit-controller", "ratelimit-controller"},
	} {
		t.Run("imageName "+tc.ref, func(t *testing.T) {
			NewWithT(t).Expect(imageName(tc.ref)).To(Equal(tc.want))
		})
	}
	t.Run("relatedImageEnv", func(t *testing.T) {
		NewWithT(t).Expect(relatedImageEnv("apirule")).To(Equal("RELATED_IMAGE_APIRULE_CONTROLLER"))
		NewWithT(t).Expect(relatedImageEnv("ratelimitservice")).To(Equal("RELATED_IMAGE_PORTICO_RATELIMIT_SERVICE"))
	})
	t.Run("oneLine", func(t *testing.T) {
		NewWithT(t).Expect(oneLine("a b\nc\n\nd\n e")).To(Equal("a b c\n\nd e"))
	})
}
