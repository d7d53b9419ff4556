package charts

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/internal/manifest"
)

const (
	chartDir = "portico"
	// configDir is where controller-gen writes the CRDs and RBAC the chart
	// is generated from.
	configDir = "../config"

	releaseName = "portico"
	// releaseNamespace differs from the portico-system that controller-gen
	// writes into the Roles, to prove the chart does not hard-wire it.
	releaseNamespace = "gateway-system"

	operatorName = "portico-operator"
)

var loadChart = sync.OnceValues(func() (*chart.Chart, error) { return loader.Load(chartDir) })

// rendered is what the chart renders: its objects in template order and
// NOTES.txt.
type rendered struct {
	objects []*unstructured.Unstructured
	notes   string
}

type renderOptions struct {
	apiVersions []string
}

type renderOption func(*renderOptions)

// withAPIVersions adds API versions to the cluster's capabilities, like
// `helm template --api-versions`.
func withAPIVersions(versions ...string) renderOption {
	return func(o *renderOptions) { o.apiVersions = append(o.apiVersions, versions...) }
}

// render renders the chart as `helm install portico -n gateway-system` with
// the given values (YAML) would: schema validation, strict templates.
func render(t *testing.T, values string, opts ...renderOption) (*rendered, error) {
	t.Helper()
	var o renderOptions
	for _, opt := range opts {
		opt(&o)
	}
	chrt, err := loadChart()
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	userValues, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values of the test are not YAML: %v", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.APIVersions = slices.Concat(caps.APIVersions, o.apiVersions)
	renderValues, err := chartutil.ToRenderValues(chrt, userValues,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(chrt, renderValues)
	if err != nil {
		return nil, err
	}

	out := &rendered{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			out.notes = files[name]
			continue
		case strings.HasPrefix(filepath.Base(name), "_"):
			continue
		}
		objects, err := manifest.Objects([]byte(files[name]))
		if err != nil {
			t.Fatalf("%s does not render valid YAML: %v\n%s", name, err, files[name])
		}
		out.objects = append(out.objects, objects...)
	}
	return out, nil
}

// mustRender renders the chart and fails the test on an error.
func mustRender(t *testing.T, values string, opts ...renderOption) *rendered {
	t.Helper()
	r, err := render(t, values, opts...)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// ref names an object: kind, namespace (empty if cluster-scoped) and name.
type ref struct{ kind, namespace, name string }

func (r ref) String() string {
	if r.namespace == "" {
		return r.kind + " " + r.name
	}
	return r.kind + " " + r.namespace + "/" + r.name
}

func refOf(u *unstructured.Unstructured) ref {
	return ref{kind: u.GetKind(), namespace: u.GetNamespace(), name: u.GetName()}
}

// refs lists the rendered objects.
func (r *rendered) refs() []ref {
	out := make([]ref, 0, len(r.objects))
	for _, u := range r.objects {
		out = append(out, refOf(u))
	}
	return out
}

// find returns the object named by kind, namespace and name, or nil.
func (r *rendered) find(kind, namespace, name string) *unstructured.Unstructured {
	for _, u := range r.objects {
		if refOf(u) == (ref{kind, namespace, name}) {
			return u
		}
	}
	return nil
}

// ofKind returns every object of a kind.
func (r *rendered) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range r.objects {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// get decodes the named object into T, rejecting fields T does not have, so
// a misspelt field in a template fails the test.
func get[T any](g Gomega, r *rendered, kind, namespace, name string) *T {
	u := r.find(kind, namespace, name)
	g.ExpectWithOffset(1, u).NotTo(BeNil(), "%s is not rendered; rendered: %v", ref{kind, namespace, name}, r.refs())
	return decode[T](g, u)
}

func decode[T any](g Gomega, u *unstructured.Unstructured) *T {
	raw, err := json.Marshal(u.Object)
	g.ExpectWithOffset(2, err).NotTo(HaveOccurred())
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	out := new(T)
	g.ExpectWithOffset(2, decoder.Decode(out)).To(Succeed(), "%s", refOf(u))
	return out
}

// generatedRBAC is one binary's role.yaml in config/rbac.
type generatedRBAC struct {
	// binary is the directory name: operator or <name>-controller.
	binary      string
	clusterRole *rbacv1.ClusterRole
	role        *rbacv1.Role
	// roleInDefault is the operator's Role in namespace default (the API
	// server's EndpointSlice), which the chart renders there.
	roleInDefault *rbacv1.Role
}

// readGeneratedRBAC reads every binary's RBAC from config/rbac.
func readGeneratedRBAC(t *testing.T) []generatedRBAC {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(configDir, "rbac", "*", "role.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no RBAC in %s/rbac (%v): run make manifests", configDir, err)
	}
	var out []generatedRBAC
	for _, p := range paths {
		binary := filepath.Base(filepath.Dir(p))
		if binary != "operator" && !strings.HasSuffix(binary, "-controller") && binary != globallimit.ServiceName {
			continue
		}
		objects, err := manifest.ReadObjects(p)
		if err != nil {
			t.Fatal(err)
		}
		rbac := generatedRBAC{binary: binary}
		g := NewWithT(t)
		for _, u := range objects {
			switch u.GetKind() {
			case "ClusterRole":
				rbac.clusterRole = decode[rbacv1.ClusterRole](g, u)
			case "Role":
				if u.GetNamespace() == "default" {
					rbac.roleInDefault = decode[rbacv1.Role](g, u)
					continue
				}
				rbac.role = decode[rbacv1.Role](g, u)
			default:
				t.Fatalf("%s: unexpected %s", p, u.GetKind())
			}
		}
		out = append(out, rbac)
	}
	return out
}

// controllerNames are the controllers config/rbac has RBAC for: apirule, ...
func controllerNames(t *testing.T) []string {
	var names []string
	for _, rbac := range readGeneratedRBAC(t) {
		if name, ok := strings.CutSuffix(rbac.binary, "-controller"); ok {
			names = append(names, name)
		}
	}
	return names
}

// readGeneratedCRDs reads every CRD controller-gen wrote into config/.
func readGeneratedCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(configDir, "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in %s/crd/bases (%v): run make manifests", configDir, err)
	}
	var out []*unstructured.Unstructured
	for _, p := range paths {
		objects, err := manifest.ReadObjects(p)
		if err != nil || len(objects) != 1 {
			t.Fatalf("%s: want one CRD (%v)", p, err)
		}
		out = append(out, objects[0])
	}
	return out
}
