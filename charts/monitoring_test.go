package charts

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// controllerPodLabels are the labels the operator gives a controller's pods
// (operator/internal/render.Labels).
func controllerPodLabels(name string) labels.Set {
	return labels.Set{
		"app.kubernetes.io/name":         name + "-controller",
		"app.kubernetes.io/part-of":      operatorv1alpha1.PartOf,
		"app.kubernetes.io/managed-by":   operatorv1alpha1.ManagedBy,
		operatorv1alpha1.LabelController: name,
	}
}

// checkPodMonitor checks the PodMonitor of metrics.podMonitor (enabled with
// interval 15s, scrapeTimeout 10s and the label release=prometheus): it
// scrapes the metrics port of every controller's pods in the release
// namespace, and nothing else, under the job "portico".
func checkPodMonitor(g Gomega, r *rendered) {
	pm := r.find("PodMonitor", releaseNamespace, "portico-controllers")
	g.Expect(pm).NotTo(BeNil())
	g.Expect(pm.GetAPIVersion()).To(Equal("monitoring.coreos.com/v1"))
	g.Expect(pm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
	jobLabel, _, _ := unstructured.NestedString(pm.Object, "spec", "jobLabel")
	g.Expect(jobLabel).To(Equal("app.kubernetes.io/part-of"))
	namespaces, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames")
	g.Expect(namespaces).To(Equal([]string{releaseNamespace}), "pods of other namespaces must never be scraped as Portico's")

	raw, found, err := unstructured.NestedMap(pm.Object, "spec", "selector")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	sel := decode[metav1.LabelSelector](g, &unstructured.Unstructured{Object: raw})
	selector, err := metav1.LabelSelectorAsSelector(sel)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"apirule", "ratelimit", "gateway"} {
		g.Expect(selector.Matches(controllerPodLabels(name))).To(BeTrue(), "%s-controller's pods", name)
	}
	operatorPod := labels.Set(operatorDeployment(g, r).Spec.Template.Labels)
	g.Expect(selector.Matches(operatorPod)).To(BeFalse(), "the operator is scraped through its ServiceMonitor")
	notAController := controllerPodLabels("apirule")
	delete(notAController, operatorv1alpha1.LabelController)
	g.Expect(selector.Matches(notAController)).To(BeFalse())

	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	g.Expect(endpoints).To(Equal([]any{map[string]any{
		"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s", "scrapeTimeout": "10s",
	}}))
}

// checkPrometheusRule checks the PrometheusRule of metrics.prometheusRule
// (enabled with the label release=prometheus) carries the rule file that
// promtool tests (test/monitoring), written for portico-system, with the
// release namespace in every namespace selector: the alerts read only the
// series of Portico's own pods, never a tenant's of the same names.
func checkPrometheusRule(g Gomega, r *rendered) {
	pr := r.find("PrometheusRule", releaseNamespace, "portico")
	g.Expect(pr).NotTo(BeNil())
	g.Expect(pr.GetAPIVersion()).To(Equal("monitoring.coreos.com/v1"))
	g.Expect(pr.GetLabels()).To(SatisfyAll(
		HaveKeyWithValue("release", "prometheus"),
		HaveKeyWithValue("app.kubernetes.io/part-of", "portico"),
	))
	raw, err := os.ReadFile(filepath.Join(chartDir, "files", "monitoring", "rules.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	file := string(raw)
	selectors := strings.Count(file, rulesNamespace)
	g.Expect(selectors).To(BeNumerically(">=", strings.Count(file, "expr:")), "every rule selects the namespace")
	var want map[string]any
	g.Expect(yaml.Unmarshal([]byte(strings.ReplaceAll(file, rulesNamespace, `namespace="`+releaseNamespace+`"`)), &want)).To(Succeed())
	g.Expect(want).To(HaveKey("groups"))
	spec, _, _ := unstructured.NestedMap(pr.Object, "spec")
	g.Expect(spec).To(Equal(want))

	groups, _, _ := unstructured.NestedSlice(spec, "groups")
	var exprs []string
	for _, group := range groups {
		rules, _, _ := unstructured.NestedSlice(group.(map[string]any), "rules")
		for _, rule := range rules {
			expr, _, _ := unstructured.NestedString(rule.(map[string]any), "expr")
			g.Expect(expr).To(ContainSubstring(`namespace="`+releaseNamespace+`"`), "every rule reads the release namespace's series")
			exprs = append(exprs, expr)
		}
	}
	all := strings.Join(exprs, "\n")
	g.Expect(all).NotTo(ContainSubstring("portico-system"))
	g.Expect(strings.Count(all, `namespace="`+releaseNamespace+`"`)).To(Equal(selectors))
}

// rulesNamespace is the selector of files/monitoring/rules.yaml that the
// chart replaces with the release namespace.
const rulesNamespace = `namespace="portico-system"`
