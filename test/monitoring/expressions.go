package monitoring

import (
	"fmt"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// DashboardVariables are values of the variables the dashboard uses, as
// Grafana would substitute them.
var DashboardVariables = map[string]string{
	"__rate_interval": "2m",
	"__interval":      "30s",
	"__range":         "6h",
	"job":             "portico",
	"namespace":       "portico-system",
}

// Expression is one PromQL expression of the rules or of the dashboard and
// the metric names it reads.
type Expression struct {
	// Where names it: "rules.yaml, <alert>" or "dashboard.json, <panel> <refId>".
	Where   string
	Expr    string
	Metrics []string
}

// Expressions returns every expression of a Prometheus rule file and of a
// Grafana dashboard with the metrics each reads (MetricNames; the
// dashboard's variables expanded with DashboardVariables). An expression
// that does not parse or names no metric is an error.
func Expressions(rules, dashboard []byte) ([]Expression, error) {
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	var exprs []Expression
	for _, group := range file.Groups {
		for _, rule := range group.Rules {
			exprs = append(exprs, Expression{Where: "rules.yaml, " + rule.Alert + rule.Record, Expr: rule.Expr})
		}
	}
	targets, err := DashboardTargets(dashboard)
	if err != nil {
		return nil, err
	}
	for _, target := range targets {
		expr, err := ExpandVariables(target.Expr, DashboardVariables)
		if err != nil {
			return nil, fmt.Errorf("dashboard.json, %s %s: %w", target.Panel, target.RefID, err)
		}
		exprs = append(exprs, Expression{Where: "dashboard.json, " + target.Panel + " " + target.RefID, Expr: expr})
	}
	p := parser.NewParser(parser.Options{})
	for i := range exprs {
		names, err := MetricNames(p, exprs[i].Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", exprs[i].Where, err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: %q reads no metric", exprs[i].Where, exprs[i].Expr)
		}
		exprs[i].Metrics = names
	}
	return exprs, nil
}
