//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
)

// The node target runs a real Prometheus server (built by make with the
// promtool of test/monitoring: bin/prometheus-<version>) as a host process.
// It discovers the pods of the release namespace through the API server and
// scrapes the operator and every controller as the chart's ServiceMonitor
// and PodMonitor would have prometheus-operator scrape them, and evaluates
// the chart's own PrometheusRule. The specs cause faults for real and
// measure how long each alert takes to fire and to resolve.
const (
	// promInterval is the scrape and rule evaluation interval: short, so
	// that the e2e measures detection rather than waiting for intervals.
	promInterval = "2s"
	// promFor replaces every alert's `for` in the e2e's copy of the rules.
	promFor = "10s"
	// alertTimingsFile, in the artifacts, lists each alert the flow
	// caused with its times to fire and to resolve.
	alertTimingsFile = "alert-timings.md"
)

var (
	prometheus *framework.Process
	// promURL is the Prometheus server's HTTP API ("" off the node target).
	promURL string
	// promStarted is when it started.
	promStarted time.Time
)

// startPrometheus starts Prometheus on the node target, scraping the
// release namespace with the chart's rules.
func startPrometheus(ctx context.Context) {
	By("running Prometheus as a host process with the chart's PrometheusRule, scraping " + namespace)
	dir := filepath.Join(artifacts, "prometheus")
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "rules.yaml"), chartRules(ctx), 0o644)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yaml"), []byte(prometheusConfig(kubeconfig)), 0o644)).To(Succeed())
	addr := freeAddr()
	var err error
	prometheus, err = framework.StartProcess(prometheusBinary(ctx), []string{
		"--config.file=" + filepath.Join(dir, "prometheus.yaml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
	}, nil, filepath.Join(artifacts, "prometheus.log"))
	Expect(err).NotTo(HaveOccurred())
	promURL, promStarted = "http://"+addr, time.Now()
	Eventually(func(g Gomega) {
		resp, err := http.Get(promURL + "/-/ready")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}, timeout, interval).Should(Succeed())
	reportTo(alertTimingsFile, "| alert | fault | fault → firing | fix → resolved |\n|---|---|---|---|")
}

// prometheusBinary is $PROMETHEUS (make test-e2e-node builds it), else the
// one `make prometheus` builds.
func prometheusBinary(ctx context.Context) string {
	if bin := os.Getenv("PROMETHEUS"); bin != "" {
		return bin
	}
	out, err := framework.Run(ctx, root, "make", "--no-print-directory", "-s", "prometheus")
	Expect(err).NotTo(HaveOccurred(), out)
	return framework.LastLine(out)
}

// chartRules renders the chart's PrometheusRule (helm template, as a
// release would install it) and returns its spec as a Prometheus rule
// file. Only then, in this copy, every alert's `for` becomes promFor (an
// alert without one keeps none): the
// e2e measures detection (fault → expression true → firing), and the
// production time to fire is that plus the rule's real `for`
// (docs/operations.md, "Alerts").
func chartRules(ctx context.Context) []byte {
	out, err := framework.Run(ctx, root, filepath.Join(testbin, "helm"), "template", release, "charts/portico",
		"--namespace", namespace, "--set", "metrics.prometheusRule.enabled=true",
		"--show-only", "templates/monitoring/prometheusrule.yaml")
	Expect(err).NotTo(HaveOccurred(), out)
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	Expect(yaml.Unmarshal([]byte(out), &rule)).To(Succeed())
	Expect(rule.Kind).To(Equal("PrometheusRule"))
	Expect(rule.Spec.Groups).NotTo(BeEmpty())
	for _, group := range rule.Spec.Groups {
		rules, _ := group["rules"].([]any)
		for _, r := range rules {
			if r, ok := r.(map[string]any); ok && r["for"] != nil {
				r["for"] = promFor
			}
		}
	}
	raw, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	Expect(err).NotTo(HaveOccurred())
	return raw
}

// prometheusConfig scrapes the pods of the release namespace through
// Kubernetes service discovery, relabelled as prometheus-operator does for
// the chart's monitors: the PodMonitor's controller pods and the operator's
// pods (the ServiceMonitor's endpoints), port "metrics", with the labels
// job (from app.kubernetes.io/part-of: "portico"), namespace, pod,
// container and endpoint. Pod IPs are reachable from the node's host.
func prometheusConfig(kubeconfig string) string {
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: portico-monitors
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %[2]q
        namespaces:
          names: [%[3]q]
    relabel_configs:
      # The PodMonitor portico-controllers: part-of portico, managed by the
      # operator, with the controller label. The ServiceMonitor: the pods
      # behind portico-operator-metrics (the operator's selector labels).
      - source_labels:
          - __meta_kubernetes_pod_label_app_kubernetes_io_part_of
          - __meta_kubernetes_pod_label_app_kubernetes_io_managed_by
          - __meta_kubernetes_pod_labelpresent_operator_portico_dev_controller
          - __meta_kubernetes_pod_label_app_kubernetes_io_name
          - __meta_kubernetes_pod_label_app_kubernetes_io_instance
        regex: "portico;portico-operator;true;.*;.*|.*;.*;.*;portico-operator;%[4]s"
        action: keep
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: metrics
        action: keep
      - source_labels: [__meta_kubernetes_pod_phase]
        regex: Failed|Succeeded
        action: drop
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
      - source_labels: [__meta_kubernetes_pod_container_name]
        target_label: container
      - target_label: endpoint
        replacement: metrics
      - source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_part_of]
        target_label: job
`, promInterval, kubeconfig, namespace, release)
}

// promGet decodes the data of a Prometheus HTTP API answer.
func promGet(g Gomega, path string, query url.Values, data any) {
	resp, err := http.Get(promURL + path + "?" + query.Encode())
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&answer)).To(Succeed())
	g.Expect(answer.Status).To(Equal("success"), answer.Error)
	g.Expect(json.Unmarshal(answer.Data, data)).To(Succeed())
}

// alertState is the state of the alert named name whose labels include
// labels ("firing", "pending", or "" when it is not active).
func alertState(name string, labels map[string]string) func(g Gomega) string {
	return func(g Gomega) string {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		promGet(g, "/api/v1/alerts", nil, &data)
		for _, a := range data.Alerts {
			if a.Labels["alertname"] != name {
				continue
			}
			matches := true
			for k, v := range labels {
				matches = matches && a.Labels[k] == v
			}
			if matches {
				return a.State
			}
		}
		return ""
	}
}

// alertFires waits for the alert to fire after a fault made at faultAt and
// returns the time it took.
func alertFires(name string, labels map[string]string, faultAt time.Time) time.Duration {
	GinkgoHelper()
	By(fmt.Sprintf("waiting for Prometheus to fire %s%v", name, labels))
	Eventually(alertState(name, labels), 3*timeout, 500*time.Millisecond).Should(Equal("firing"))
	return time.Since(faultAt)
}

// alertResolves waits for the alert to resolve after the fix made at fixAt
// and records both times in the artifacts' alert timings.
func alertResolves(name string, labels map[string]string, fault string, fired time.Duration, fixAt time.Time) {
	GinkgoHelper()
	By(fmt.Sprintf("waiting for Prometheus to resolve %s%v", name, labels))
	Eventually(alertState(name, labels), 3*timeout, 500*time.Millisecond).Should(BeEmpty())
	resolved := time.Since(fixAt)
	reportTo(alertTimingsFile, "| %s | %s | %s | %s |", name, fault, fired.Round(time.Second), resolved.Round(time.Second))
}

// scrapedMetricNames are the names of every series Prometheus scraped from
// Portico's targets (job="portico") since it started.
func scrapedMetricNames(g Gomega, since time.Time) map[string]bool {
	var names []string
	promGet(g, "/api/v1/label/__name__/values", url.Values{
		"match[]": {`{job="portico"}`},
		"start":   {fmt.Sprint(since.Unix())},
	}, &names)
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// chartMetricReads are the metric names the chart's alerts and dashboard
// read, each with the expressions that read it: test/monitoring's
// metric-names command, which extracts them with Prometheus's PromQL parser.
func chartMetricReads(ctx context.Context) map[string][]string {
	GinkgoHelper()
	out, err := framework.Run(ctx, filepath.Join(root, "test", "monitoring"), "go", "run", "./cmd/metric-names", "--where")
	Expect(err).NotTo(HaveOccurred(), out)
	reads := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, where, ok := strings.Cut(line, "\t")
		Expect(ok).To(BeTrue(), "metric-names printed %q", line)
		reads[name] = append(reads[name], where)
	}
	Expect(reads).To(HaveKey("portico_controller_phase"), "metric-names read the chart's rules")
	return reads
}

// unexported lists the metrics of reads that exported lacks.
func unexported(reads map[string][]string, exported map[string]bool) []string {
	var out []string
	for name, where := range reads {
		if !exported[name] {
			out = append(out, name+" (read by "+strings.Join(where, "; ")+")")
		}
	}
	slices.Sort(out)
	return out
}

// notReadyAlertSpecs fire the alerts on APIRules and RateLimits that are
// not Ready, with objects that cannot be applied: an APIRule whose Service
// does not exist and a RateLimit whose APIRule does not exist.
func notReadyAlertSpecs() {
	It("fires PorticoAPIRulesNotReady and PorticoRateLimitsNotReady for objects that cannot be applied, and resolves them once they are gone", func(ctx SpecContext) {
		if promURL == "" {
			Skip("Prometheus runs on the node target")
		}
		rule := &gatewayv1alpha1.APIRule{
			ObjectMeta: metav1.ObjectMeta{Name: "no-backend", Namespace: "shop"},
			Spec: gatewayv1alpha1.APIRuleSpec{
				Hosts:   []gatewayv1alpha1.Hostname{"no-backend.example.com"},
				Gateway: "istio-system/public",
				Service: &gatewayv1alpha1.ServiceReference{Name: "no-such-service", Port: 8080},
				Rules:   []gatewayv1alpha1.Rule{{Path: "/", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}},
			},
		}
		limit := &gatewayv1alpha1.RateLimit{
			ObjectMeta: metav1.ObjectMeta{Name: "no-target", Namespace: "shop"},
			Spec: gatewayv1alpha1.RateLimitSpec{
				TargetRef: gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: "no-such-apirule"},
				Local:     &gatewayv1alpha1.TokenBucket{MaxTokens: 10, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
			},
		}
		// An APIRule of another namespace for the host shop's orders holds
		// is refused (HostOccupied), which portico_refusals_total counts.
		rival := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rival"}}
		occupied := rule.DeepCopy()
		occupied.Name, occupied.Namespace = "orders", rival.Name
		occupied.Spec.Hosts = []gatewayv1alpha1.Hostname{"orders.example.com"}
		faultAt := time.Now()
		Expect(k8sClient.Create(ctx, rival)).To(Succeed())
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		Expect(k8sClient.Create(ctx, limit)).To(Succeed())
		Expect(k8sClient.Create(ctx, occupied)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apiRuleReady(g, client.ObjectKeyFromObject(rule)).Reason).To(Equal(gatewayv1alpha1.ReasonServiceNotFound))
			g.Expect(apiRuleReady(g, client.ObjectKeyFromObject(occupied)).Reason).To(Equal(gatewayv1alpha1.ReasonHostOccupied))
			l := &gatewayv1alpha1.RateLimit{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(limit), l)).To(Succeed())
			ready := apimeta.FindStatusCondition(l.Status.Conditions, gatewayv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		}, timeout, interval).Should(Succeed())
		rulesNotReady := map[string]string{"reason": gatewayv1alpha1.ReasonServiceNotFound}
		rulesFired := alertFires("PorticoAPIRulesNotReady", rulesNotReady, faultAt)
		limitsFired := alertFires("PorticoRateLimitsNotReady", nil, faultAt)

		fixAt := time.Now()
		Expect(k8sClient.Delete(ctx, rule)).To(Succeed())
		Expect(k8sClient.Delete(ctx, limit)).To(Succeed())
		Expect(k8sClient.Delete(ctx, occupied)).To(Succeed())
		Expect(k8sClient.Delete(ctx, rival)).To(Succeed())
		alertResolves("PorticoAPIRulesNotReady", rulesNotReady, "APIRule of a missing Service", rulesFired, fixAt)
		alertResolves("PorticoRateLimitsNotReady", nil, "RateLimit of a missing APIRule", limitsFired, fixAt)
	})
}

// quarantineAlertSpec writes a VirtualService status the API server admits
// but Go cannot decode (a tenant with status rights could): the apirule
// controller sets it aside and PorticoQuarantinedObjects fires. It counts
// an hour's increase, so it resolves only an hour after the fix: the spec
// records the time to fire.
func quarantineAlertSpec() {
	It("fires PorticoQuarantinedObjects for a VirtualService whose status does not decode", func(ctx SpecContext) {
		if promURL == "" {
			Skip("Prometheus runs on the node target")
		}
		vs := &unstructured.Unstructured{}
		vs.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("VirtualService"))
		vs.SetNamespace("shop")
		vs.SetName("orders")
		faultAt := time.Now()
		Expect(k8sClient.Status().Patch(ctx, vs, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"observedGeneration":"not-a-number"}}`)))).To(Succeed())
		quarantined := map[string]string{"kind": "VirtualService"}
		fired := alertFires("PorticoQuarantinedObjects", quarantined, faultAt)
		reportTo(alertTimingsFile, "| PorticoQuarantinedObjects | a VirtualService status that does not decode | %s | – (an hour's increase) |", fired.Round(time.Second))
		Expect(k8sClient.Status().Patch(ctx, vs, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"observedGeneration":null}}`)))).To(Succeed())
	})
}

// scrapedMetricsSpec holds the chart's alerts and dashboard to what Portico
// really exports: every metric they read must be among the series
// Prometheus scraped from the operator and the controllers during the flow
// (the specs before it caused the events some metrics count).
func scrapedMetricsSpec() {
	It("exports every metric the chart's alerts and dashboard read, as a real Prometheus scraped them", func(ctx SpecContext) {
		if promURL == "" {
			Skip("Prometheus runs on the node target")
		}
		reads := chartMetricReads(ctx)
		Eventually(func(g Gomega) {
			g.Expect(unexported(reads, scrapedMetricNames(g, promStarted))).To(BeEmpty(),
				"metrics the chart reads that no Portico target exported")
		}, 30*time.Second, time.Second).Should(Succeed())
	})
}

// noLeaderAlertSpec scales the operator to zero: no replica is scraped, so
// PorticoOperatorNoLeader fires on its absent arm (nothing starts, stops or
// repairs the controllers then), and resolves once a replica is back and
// holds the Lease. The controllers keep serving meanwhile.
func noLeaderAlertSpec() {
	It("fires PorticoOperatorNoLeader while the operator is scaled to zero, and resolves once it leads again", func(ctx SpecContext) {
		if promURL == "" {
			Skip("Prometheus runs on the node target")
		}
		scale := func(ctx context.Context, replicas int32) {
			GinkgoHelper()
			Expect(k8sClient.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "portico-operator", Namespace: namespace}},
				client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))).To(Succeed())
		}
		before := ptr.Deref(deployment(Default, "portico-operator").Spec.Replicas, 1)
		DeferCleanup(func(ctx SpecContext) { scale(ctx, before) }) // the spec's ctx is done by then
		noLeader := map[string]string{"namespace": namespace}
		Expect(alertState("PorticoOperatorNoLeader", noLeader)(Default)).To(BeEmpty())

		faultAt := time.Now()
		scale(ctx, 0)
		fired := alertFires("PorticoOperatorNoLeader", noLeader, faultAt)

		fixAt := time.Now()
		scale(ctx, before)
		Eventually(func(g Gomega) {
			d := deployment(g, "portico-operator")
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.AvailableReplicas).To(Equal(before))
		}, 2*timeout, interval).Should(Succeed())
		alertResolves("PorticoOperatorNoLeader", noLeader, "operator scaled to zero", fired, fixAt)
	})
}

// writeErrorsAlertSpec has an admission policy of the cluster's (as a
// Kyverno or Gatekeeper rule would) reject the operator's repair of a
// Deployment edited by hand: the operator's writes fail and its reconciles
// return errors, so PorticoOperatorWriteErrors and PorticoReconcileErrors
// fire. Both read a 10-minute window of the counters, so they resolve only
// 10 minutes after the fix: the spec records the times to fire, and that the
// repair goes through once the policy is gone.
func writeErrorsAlertSpec() {
	It("fires PorticoOperatorWriteErrors and PorticoReconcileErrors while an admission policy rejects the operator's repairs", func(ctx SpecContext) {
		if promURL == "" {
			Skip("Prometheus runs on the node target")
		}
		const target = "ratelimit-controller"
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-deny-operator-repairs"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{
					Name: "the-operators-writes-to-" + target,
					Expression: fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:portico-operator' && object.metadata.namespace == '%s' && object.metadata.name == '%s'",
						namespace, namespace, target),
				}},
				Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "the e2e's policy rejects the operator's writes"}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		removePolicy := func(ctx context.Context) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) { removePolicy(ctx) })
		want := ptr.Deref(deployment(Default, target).Spec.Replicas, 1)

		By("waiting until the API server enforces the policy (a dry-run write as the operator is rejected)")
		asOperator := rest.CopyConfig(restConfig)
		asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":portico-operator"}
		operatorClient, err := client.New(asOperator, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			err := operatorClient.Update(ctx, deployment(g, target), client.DryRunAll)
			g.Expect(err).To(MatchError(ContainSubstring("the e2e's policy rejects the operator's writes")))
		}, timeout, interval).Should(Succeed())

		By("scaling " + target + " by hand, which the operator repairs and the policy rejects")
		faultAt := time.Now()
		Eventually(func() error {
			d := deployment(Default, target)
			d.Spec.Replicas = ptr.To(want + 1)
			return k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))
		}, timeout, interval).Should(Succeed())
		operatorErrors := map[string]string{"namespace": namespace, "controller": "ratelimit"}
		firedWrites := alertFires("PorticoOperatorWriteErrors", operatorErrors, faultAt)
		reportTo(alertTimingsFile, "| PorticoOperatorWriteErrors | an admission policy rejects the operator's repair | %s | – (a 10-minute window) |", firedWrites.Round(time.Second))
		firedReconcile := alertFires("PorticoReconcileErrors", map[string]string{"namespace": namespace}, faultAt)
		reportTo(alertTimingsFile, "| PorticoReconcileErrors | an admission policy rejects the operator's repair | %s | – (a 10-minute window) |", firedReconcile.Round(time.Second))

		By("removing the policy: the operator's repair goes through")
		removePolicy(ctx)
		Eventually(func(g Gomega) {
			g.Expect(ptr.Deref(deployment(g, target).Spec.Replicas, 1)).To(Equal(want))
		}, 2*timeout, interval).Should(Succeed())
	})
}
