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

	. "github.com/onsi/gomega"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
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
				crds++ // installed by envtest from config/crd/bases, the same bytes (TestOwnedCRDs)
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
		"OwnNamespace": true, "SingleNamespace": false, "MultiNamespace": false, "AllNamespaces": false,
	}))

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
// and copied byte for byte into bundle/manifests.
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
			g.Expect(string(files[name])).To(Equal(string(raw)), "%s is not a copy of config/crd/bases", name)

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

// (d) The CSV grants each ServiceAccount exactly the rules controller-gen
// generated into config/rbac: ClusterRole rules as clusterPermissions, Role
// rules as permissions, and the rules of the operator's Role in namespace
// default (the API server's EndpointSlice) as clusterPermissions too, after
// the ClusterRole's: OLM creates a bundle's Roles only in the install
// namespace.
func TestPermissionsMatchConfigRBAC(t *testing.T) {
	csv := parseCSV(NewWithT(t), readBundle(t, checkedInDir))
	byServiceAccount := func(perms []v1alpha1.StrategyDeploymentPermissions) map[string][]rbacv1.PolicyRule {
		out := map[string][]rbacv1.PolicyRule{}
		for _, p := range perms {
			NewWithT(t).Expect(out).NotTo(HaveKey(p.ServiceAccountName), "%s is listed twice", p.ServiceAccountName)
			out[p.ServiceAccountName] = p.Rules
		}
		return out
	}
	gotCluster := byServiceAccount(csv.Spec.Install.Spec.ClusterPermissions)
	gotNamespaced := byServiceAccount(csv.Spec.Install.Spec.Permissions)

	paths, err := filepath.Glob(filepath.Join(root, "config", "rbac", "*", "role.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no config/rbac/*/role.yaml: %v", err)
	}
	wantCluster := map[string][]rbacv1.PolicyRule{}
	wantNamespaced := map[string][]rbacv1.PolicyRule{}
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
				switch {
				case role.Kind == "ClusterRole":
					wantCluster[sa] = append(role.Rules, wantCluster[sa]...)
				case role.Kind == "Role" && role.Namespace == apiServerNamespace:
					g.Expect(sa).To(Equal("portico-operator"), "only the operator reads namespace default")
					wantCluster[sa] = append(wantCluster[sa], role.Rules...)
				case role.Kind == "Role":
					wantNamespaced[sa] = role.Rules
					g.Expect(gotNamespaced).To(HaveKeyWithValue(sa, role.Rules), "permissions of %s", sa)
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
	g.Expect(gotNamespaced).To(Equal(wantNamespaced), "permissions that config/rbac does not grant")

	// The contract's ServiceAccounts, the operator's first; the rate-limit
	// service has namespaced permissions only.
	wantSAs := []string{"portico-operator"}
	for _, name := range chartControllerNames(t) {
		wantSAs = append(wantSAs, controllerBinary(name))
	}
	g.Expect(slices.Concat(slices.Collect(maps.Keys(gotCluster)), []string{"portico-ratelimit-service"})).To(ConsistOf(wantSAs))
	g.Expect(gotNamespaced).To(HaveKey("portico-ratelimit-service"))
	g.Expect(csv.Spec.Install.Spec.ClusterPermissions[0].ServiceAccountName).To(Equal("portico-operator"))
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
}

// The chart's NetworkPolicy of the operator is in the bundle (OLM v0 creates
// NetworkPolicies of a bundle in the install namespace) and selects the
// pods of the CSV's Deployment.
func TestOperatorNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	files := readBundle(t, checkedInDir)
	raw, ok := files["manifests/portico-operator_networking.k8s.io_v1_networkpolicy.yaml"]
	g.Expect(ok).To(BeTrue(), "the bundle carries no NetworkPolicy portico-operator")
	var policy networkingv1.NetworkPolicy
	g.Expect(yaml.UnmarshalStrict(raw, &policy)).To(Succeed())
	selector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Empty()).To(BeFalse())
	spec := operatorDeploymentSpec(g, parseCSV(g, files))
	g.Expect(selector.Matches(labels.Set(spec.Template.Labels))).To(BeTrue(), "the NetworkPolicy does not select the operator's pods")
	g.Expect(policy.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
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
// (OLM would create them in the install namespace); in any other namespace
// but the release one they fail the generation.
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
	cluster, namespaced, err := r.rulesByServiceAccount(DefaultNamespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(namespaced).To(BeEmpty())
	g.Expect(cluster).To(Equal(map[string][]rbacv1.PolicyRule{
		"op": {{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get"}}},
	}))

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
