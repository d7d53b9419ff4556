package cli

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/manifest"
	"github.com/portico-dev/portico/operator/internal/render"
	"github.com/portico-dev/portico/test/testenv"
)

// renderChart renders charts/portico as `helm install portico -n
// portico-system` with the values (YAML), and networkPolicy.byOperator
// set as asked, and returns its objects.
func renderChart(t *testing.T, values string, byOperator bool) []*unstructured.Unstructured {
	t.Helper()
	chrt, err := loader.Load(filepath.Join(testenv.RepoRoot(), "charts", "portico"))
	if err != nil {
		t.Fatal(err)
	}
	user, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := user["networkPolicy"].(map[string]any)
	if policy == nil {
		policy = map[string]any{}
	}
	policy["byOperator"] = byOperator
	user["networkPolicy"] = policy
	renderValues, err := chartutil.ToRenderValues(chrt, user,
		chartutil.ReleaseOptions{Name: "portico", Namespace: DefaultNamespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(chrt, renderValues)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for name, content := range files {
		if !strings.HasSuffix(name, ".yaml") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		objects, err := manifest.Objects([]byte(content))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, objects...)
	}
	return out
}

// renderedOf decodes the one object of kind the chart renders, nil when
// it renders none.
func renderedOf[T any](t *testing.T, objects []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	var found *T
	for _, u := range objects {
		if u.GetKind() != kind {
			continue
		}
		if found != nil {
			t.Fatalf("the chart renders two %ss", kind)
		}
		found = new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, found); err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// With networkPolicy.byOperator the chart renders no NetworkPolicy and
// passes its values to the operator as flags, from which the operator
// writes the very policy the chart renders without byOperator: the chart's
// cases (charts.TestOperatorNetworkPolicy), end to end through the flags.
func TestOwnNetworkPolicyIsTheCharts(t *testing.T) {
	for _, values := range []string{
		"",
		"networkPolicy: {metricsNamespaces: [monitoring, observability]}",
		"networkPolicy: {metricsNamespaces: [monitoring]}\nmetrics: {enabled: false}",
		"networkPolicy: {apiServer: {cidrs: [10.0.0.10/32, 'fd00::1/128'], ports: [8443]}}",
	} {
		t.Run(values, func(t *testing.T) {
			g := NewWithT(t)
			charts := renderedOf[networkingv1.NetworkPolicy](t, renderChart(t, values, false), "NetworkPolicy")
			g.Expect(charts).NotTo(BeNil())

			byOperator := renderChart(t, values, true)
			g.Expect(renderedOf[networkingv1.NetworkPolicy](t, byOperator, "NetworkPolicy")).To(BeNil(), "the chart renders the policy as well")
			deployment := renderedOf[appsv1.Deployment](t, byOperator, "Deployment")
			opts := &runOptions{}
			cmd := &cobra.Command{}
			opts.bindFlags(cmd)
			g.Expect(cmd.Flags().Parse(deployment.Spec.Template.Spec.Containers[0].Args)).To(Succeed())
			g.Expect(opts.ownNetworkPolicy).To(BeTrue())
			policy, err := opts.operatorPolicy()
			g.Expect(err).NotTo(HaveOccurred())

			own := render.OperatorNetworkPolicy(deployment, policy)
			g.Expect(own.Spec).To(Equal(charts.Spec))
		})
	}

	t.Run("networkPolicy.enabled=false: no policy, no flag", func(t *testing.T) {
		g := NewWithT(t)
		objects := renderChart(t, "networkPolicy: {enabled: false}", true)
		g.Expect(renderedOf[networkingv1.NetworkPolicy](t, objects, "NetworkPolicy")).To(BeNil())
		args := renderedOf[appsv1.Deployment](t, objects, "Deployment").Spec.Template.Spec.Containers[0].Args
		g.Expect(strings.Join(args, " ")).NotTo(ContainSubstring("--own-network-policy"))
	})
}

// The flags are checked before the operator starts.
func TestOperatorPolicyFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--own-network-policy-metrics-namespaces=Monitoring"}, wantErr: "is not a namespace name"},
		{args: []string{"--own-network-policy-api-server-cidrs=10.0.0.1"}, wantErr: "own-network-policy-api-server-cidrs"},
		{args: []string{"--own-network-policy-api-server-ports=0"}, wantErr: "0 is not a port"},
		{args: []string{"--metrics-bind-address=localhost"}, wantErr: "--metrics-bind-address"},
		{args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=:9440"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			opts := &runOptions{}
			cmd := &cobra.Command{}
			opts.bindFlags(cmd)
			g.Expect(cmd.Flags().Parse(tc.args)).To(Succeed())
			policy, err := opts.operatorPolicy()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(policy).To(Equal(render.OperatorPolicy{APIServerPorts: []int32{443, 6443}, HealthPort: 9440}))
		})
	}
}
