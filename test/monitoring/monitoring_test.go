package monitoring

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const (
	// assetsDir holds the rules, their unit tests and the dashboard, as the
	// chart's templates render them.
	assetsDir     = "../../charts/portico/files/monitoring"
	rulesFile     = "rules.yaml"
	rulesTestFile = "rules_test.yaml"
	dashboardFile = "dashboard.json"
	operationsDoc = "../../docs/operations.md"
	// runbooks is the section of operations.md with one subsection per
	// alert, titled by the alert's name.
	runbooks   = "Runbooks"
	runbookURL = "https://github.com/portico-dev/portico/blob/main/docs/operations.md#"
)

// severities are the values of an alert's severity label.
var severities = []string{"critical", "warning", "info"}

// promtool runs promtool with args: the binary in $PROMTOOL (make test
// builds it into bin/), else `go tool promtool`, which builds the version
// this module pins into the build cache (the test runs in the module).
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "promtool"}, args...)...)
	if bin := os.Getenv("PROMTOOL"); bin != "" {
		cmd = exec.Command(bin, args...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestPromtoolCheckRules(t *testing.T) {
	g := NewWithT(t)
	out, err := promtool(t, "check", "rules", "--lint=all", "--lint-fatal", filepath.Join(assetsDir, rulesFile))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("SUCCESS: %d rules found", len(loadAlerts(t))))
}

func TestPromtoolTestRules(t *testing.T) {
	g := NewWithT(t)
	out, err := promtool(t, "test", "rules", filepath.Join(assetsDir, rulesTestFile))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("SUCCESS"))
}

// loadAlerts loads rules.yaml with Prometheus's rule loader, which also
// parses every expression and checks the label and annotation templates.
func loadAlerts(t *testing.T) []rulefmt.Rule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(assetsDir, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(raw, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	var alerts []rulefmt.Rule
	for _, group := range groups.Groups {
		for _, rule := range group.Rules {
			if rule.Alert == "" {
				t.Errorf("%s: group %s has a recording rule %s; the checks here are for alerts", rulesFile, group.Name, rule.Record)
			}
			alerts = append(alerts, rule)
		}
	}
	if len(alerts) == 0 {
		t.Fatalf("%s: no alert", rulesFile)
	}
	return alerts
}

// ruleTests is what the checks read of rules_test.yaml.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			EvalTime  string `yaml:"eval_time"`
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// Every alert is unit-tested both ways (promtool runs the tests, this checks
// they exist), carries a severity, a summary, a description and the URL of
// its runbook, and every runbook in operations.md is an alert's.
func TestEveryAlertIsTestedAndDocumented(t *testing.T) {
	alerts := loadAlerts(t)
	raw, err := os.ReadFile(filepath.Join(assetsDir, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, test := range tests.Tests {
		for _, c := range test.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.AlertName] = true
			} else {
				quiet[c.AlertName] = true
			}
		}
	}
	doc := readFile(t, operationsDoc)
	section, err := Section(doc, runbooks)
	if err != nil {
		t.Fatalf("%s: %v", operationsDoc, err)
	}
	documented := Headings(section, 4)

	names := map[string]bool{}
	for _, alert := range alerts {
		t.Run(alert.Alert, func(t *testing.T) {
			g := NewWithT(t)
			names[alert.Alert] = true
			g.Expect(fires).To(HaveKey(alert.Alert), "%s has no test in which it fires", rulesTestFile)
			g.Expect(quiet).To(HaveKey(alert.Alert), "%s has no test in which it stays quiet", rulesTestFile)
			g.Expect(alert.Labels).To(HaveKeyWithValue("severity", BeElementOf(severities)))
			g.Expect(alert.Annotations).To(HaveKeyWithValue("summary", Not(BeEmpty())))
			g.Expect(alert.Annotations).To(HaveKeyWithValue("description", ContainSubstring("`")),
				"the description names what to run, in backquotes")
			g.Expect(alert.Annotations).To(HaveKeyWithValue("runbook_url", runbookURL+strings.ToLower(alert.Alert)))
			g.Expect(documented).To(ContainElement(alert.Alert), "%s, %q: no runbook titled %s", operationsDoc, runbooks, alert.Alert)
		})
	}
	for name := range fires {
		if !names[name] {
			t.Errorf("%s tests %s, which is no alert of %s", rulesTestFile, name, rulesFile)
		}
	}
	for name := range quiet {
		if !names[name] {
			t.Errorf("%s tests %s, which is no alert of %s", rulesTestFile, name, rulesFile)
		}
	}
	for _, title := range documented {
		if !names[title] {
			t.Errorf("%s, %q: a runbook for %s, which is no alert of %s", operationsDoc, runbooks, title, rulesFile)
		}
	}
	if !slices.Equal(tests.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s tests %v, not %s", rulesTestFile, tests.RuleFiles, rulesFile)
	}
}

// documentedMetrics returns the metrics of the tables of operations.md's
// "Portico's metrics" and "Standard metrics", which docs/facts_test.go holds
// to the code.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc := readFile(t, operationsDoc)
	out := map[string]bool{}
	for _, title := range []string{"Portico's metrics", "Standard metrics"} {
		section, err := Section(doc, title)
		if err != nil {
			t.Fatalf("%s: %v", operationsDoc, err)
		}
		for name := range TableMetrics(section) {
			out[name] = true
		}
	}
	for _, name := range []string{"portico_controller_phase", "workqueue_depth", "rest_client_requests_total"} {
		if !out[name] {
			t.Fatalf("%s: found no %s in the metrics tables: the tables are no longer read", operationsDoc, name)
		}
	}
	return out
}

// porticoNamespace is the namespace rules.yaml and dashboard.json are
// written for; the chart puts the release namespace in its place
// (charts/monitoring_test.go checks it does).
const porticoNamespace = "portico-system"

// Every selector of the rules and of the dashboard reads only the series of
// Portico's namespace, and every aggregation of the rules keeps the
// namespace label: a tenant's series of the same names from its own
// namespace neither fire nor hide an alert (rules_test.yaml runs that attack)
// nor show on the dashboard.
func TestExpressionsReadOnlyPorticosNamespace(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	check := func(t *testing.T, where, expr string, keepLabel bool) {
		t.Helper()
		unscoped, err := Unscoped(p, expr, porticoNamespace, keepLabel)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		for _, part := range unscoped {
			t.Errorf("%s: %s may read or merge series outside namespace %s", where, part, porticoNamespace)
		}
	}
	t.Run("rules", func(t *testing.T) {
		for _, alert := range loadAlerts(t) {
			check(t, rulesFile+", "+alert.Alert, alert.Expr, true)
		}
	})
	t.Run("dashboard", func(t *testing.T) {
		targets, err := DashboardTargets([]byte(readFile(t, filepath.Join(assetsDir, dashboardFile))))
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range targets {
			where := dashboardFile + ", " + target.Panel + " " + target.RefID
			expr, err := ExpandVariables(target.Expr, DashboardVariables)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			check(t, where, expr, false)
		}
	})
}

// Every expression of the rules and of the dashboard parses with
// Prometheus's parser and reads only documented metrics.
func TestExpressionsReadDocumentedMetrics(t *testing.T) {
	documented := documentedMetrics(t)
	p := parser.NewParser(parser.Options{})
	check := func(t *testing.T, where, expr string) {
		t.Helper()
		names, err := MetricNames(p, expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric", where, expr)
		}
		for _, name := range names {
			if !Documented(name, documented) {
				t.Errorf("%s: %q reads %s, which %s does not document", where, expr, name, operationsDoc)
			}
		}
	}

	t.Run("rules", func(t *testing.T) {
		for _, alert := range loadAlerts(t) {
			check(t, rulesFile+", "+alert.Alert, alert.Expr)
		}
	})
	t.Run("dashboard", func(t *testing.T) {
		targets, err := DashboardTargets([]byte(readFile(t, filepath.Join(assetsDir, dashboardFile))))
		if err != nil {
			t.Fatal(err)
		}
		if len(targets) == 0 {
			t.Fatalf("%s: no query", dashboardFile)
		}
		for _, target := range targets {
			where := dashboardFile + ", " + target.Panel + " " + target.RefID
			expr, err := ExpandVariables(target.Expr, DashboardVariables)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			check(t, where, expr)
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
