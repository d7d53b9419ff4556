package istio

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pkg/jwt"
	istiolog "istio.io/istio/pkg/log"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// repoRoot is the Portico tree this module's replace directive points at.
const repoRoot = "../.."

// goldenDir holds the apirule controller's golden files.
var goldenDir = filepath.Join(repoRoot, "controllers", "apirule", "internal", "translate", "testdata")

// corpusEnv names a directory holding a corpus TestIstioCorpus,
// TestIstioObjects (the gateway controller's objects) and
// TestIstioEnvoyFilters (the ratelimit controller's) wrote; without it,
// TestMain writes one into a temporary directory.
const corpusEnv = "PORTICO_ISTIO_CORPUS"

// corpusDir is the corpus the tests read, set by TestMain.
var corpusDir string

// minCorpus is how many corpus translations of each mode the tests require;
// lower it only to debug on a part of the corpus.
var minCorpus = flag.Int("min-corpus", 500, "the corpus translations of each mode the tests require (lower only to debug on a part of the corpus)")

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	// istiod's components log at info; the tests say what failed.
	for _, s := range istiolog.Scopes() {
		s.SetOutputLevel(istiolog.NoneLevel)
	}
	// Envoy fetches the key sets (remote JWKS) rather than istiod, which
	// cannot reach them offline: the generated providers then name the
	// jwksUri they trust, which is what tells key sets apart.
	features.JwksFetchMode = jwt.Envoy
	corpusDir = os.Getenv(corpusEnv)
	if corpusDir == "" {
		dir, err := os.MkdirTemp("", "istio-corpus")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("go", "test", "-ldflags=-w", "-count=1", "-run", "^(TestIstioCorpus|TestIstioObjects|TestIstioEnvoyFilters)$",
			"./controllers/apirule/internal/translate", "./controllers/gateway/internal/istiocorpus", "./controllers/ratelimit/internal/topology",
			"-args", "-corpus-out", dir)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("write the corpus (go test -run TestIstioCorpus|TestIstioObjects|TestIstioEnvoyFilters): %w\n%s", err, out)
		}
		corpusDir = dir
	}
	return m.Run(), nil
}

// output is a translation's objects as the golden files and the corpus
// hold them (controllers/apirule/internal/translate.Output).
type output struct {
	VirtualService *networkingv1.VirtualService `json:"VirtualService,omitempty"`
	HTTPRoute      *gwapiv1.HTTPRoute           `json:"HTTPRoute,omitempty"`
	Workloads      []workload
}

type workload struct {
	Service               types.NamespacedName
	AuthorizationPolicy   *securityv1.AuthorizationPolicy
	RequestAuthentication *securityv1.RequestAuthentication
	CustomPolicy          *securityv1.AuthorizationPolicy `json:",omitempty"`
}

// translation is one file of outputs: a golden file or a corpus entry.
type translation struct {
	// Name says where it comes from: golden/<file> or corpus/<file>.
	Name string
	output
}

// objects are the objects the controller writes for the translation, in
// the order it writes them: access policies, then the route.
func (o output) objects() []object {
	var out []object
	for _, w := range o.Workloads {
		if w.RequestAuthentication != nil {
			out = append(out, w.RequestAuthentication)
		}
		if w.CustomPolicy != nil {
			out = append(out, w.CustomPolicy)
		}
		if w.AuthorizationPolicy != nil {
			out = append(out, w.AuthorizationPolicy)
		}
	}
	if o.VirtualService != nil {
		out = append(out, o.VirtualService)
	}
	if o.HTTPRoute != nil {
		out = append(out, o.HTTPRoute)
	}
	return out
}

// isHTTPRoute reports whether the translation is of HTTPRoute mode.
func (t translation) isHTTPRoute() bool { return strings.HasSuffix(t.Name, ".httproute.golden.yaml") }

// translations reads every golden file and every corpus entry.
func translations(t *testing.T) []translation {
	t.Helper()
	var out []translation
	for _, src := range []struct{ label, dir string }{{"golden", goldenDir}, {"corpus", corpusDir}} {
		files, err := filepath.Glob(filepath.Join(src.dir, "*.golden.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(files)
		if len(files) == 0 {
			t.Fatalf("no golden files in %s", src.dir)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tr := translation{Name: src.label + "/" + filepath.Base(f)}
			if err := yaml.UnmarshalStrict(raw, &tr.output); err != nil {
				t.Fatalf("%s: %v", tr.Name, err)
			}
			out = append(out, tr)
		}
	}
	return out
}

// counts says how many translations of each source and mode were read, so
// a test can prove it saw the whole corpus.
func counts(trs []translation) map[string]int {
	out := map[string]int{}
	for _, tr := range trs {
		source, _, _ := strings.Cut(tr.Name, "/")
		mode := "istio"
		if tr.isHTTPRoute() {
			mode = "httproute"
		}
		out[source+"/"+mode]++
	}
	return out
}

// checkCoverage fails unless the translations hold every golden file and
// at least 500 corpus APIRules in each mode.
func checkCoverage(t *testing.T, trs []translation) {
	t.Helper()
	c := counts(trs)
	for _, k := range []string{"corpus/istio", "corpus/httproute"} {
		if c[k] < *minCorpus {
			t.Fatalf("read %d translations of %s, want at least %d (%v)", c[k], k, *minCorpus, c)
		}
	}
	if c["golden/istio"] < 10 || c["golden/httproute"] < 10 {
		t.Fatalf("read too few golden files: %v", c)
	}
	t.Logf("translations: %v", c)
}

// controllerObjects reads the objects of the gateway and ratelimit
// controllers in the corpus (<controller>.<case>.object.yaml), by file.
func controllerObjects(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.object.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	byController := map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(f)
		out[name] = u
		controller, _, _ := strings.Cut(name, ".")
		byController[controller]++
	}
	if byController["default-gateway"] < 5 || byController["ratelimit"] < 16 {
		t.Fatalf("the corpus holds too few objects of the gateway and ratelimit controllers: %v", byController)
	}
	return out
}
