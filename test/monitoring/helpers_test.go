package monitoring

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/prometheus/promql/parser"
)

func TestMetricNames(t *testing.T) {
	cases := map[string]struct {
		expr    string
		want    []string
		wantErr string
	}{
		"a selector":             {expr: `up`, want: []string{"up"}},
		"aggregation and offset": {expr: `sum by (a) (x_total unless x_total offset 1h) > 0`, want: []string{"x_total"}},
		"range vector in a function": {
			expr: `histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{job="p"}[5m])))`, want: []string{"a_seconds_bucket"},
		},
		"binary expression of two metrics": {expr: `b - on (x) a`, want: []string{"a", "b"}},
		"subquery":                         {expr: `max_over_time(rate(c_total[1m])[10m:1m])`, want: []string{"c_total"}},
		"no metric":                        {expr: `time() - 3600`, want: nil},
		"a syntax error":                   {expr: `sum by (a (x)`, wantErr: "parse"},
		"a selector without a name":        {expr: `{job="portico"}`, wantErr: "names no metric"},
		"a name by regular expression":     {expr: `count({__name__=~"portico_.*"})`, wantErr: "names no metric"},
	}
	p := parser.NewParser(parser.Options{})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := MetricNames(p, tc.expr)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestUnscoped(t *testing.T) {
	cases := map[string]struct {
		expr      string
		keepLabel bool
		want      []string
		wantErr   string
	}{
		"scoped and grouped by namespace": {
			expr: `sum by (namespace, reason) (rate(a_total{namespace="ns", job="p"}[5m])) > 0`, keepLabel: true,
		},
		"without another label keeps namespace": {expr: `max without (pod) (a{namespace="ns"})`, keepLabel: true},
		"no namespace matcher":                  {expr: `max(a{job="p"})`, want: []string{`a{job="p"}`}},
		"another namespace":                     {expr: `a{namespace="team-a"}`, want: []string{`a{namespace="team-a"}`}},
		"a regular expression":                  {expr: `a{namespace=~"ns|team-a"}`, want: []string{`a{namespace=~"ns|team-a"}`}},
		"one side of a binary expression": {
			expr: `a{namespace="ns"} unless b offset 1h`, want: []string{`b offset 1h`},
		},
		"sum drops the namespace": {
			expr: `sum(a{namespace="ns"}) < 1`, keepLabel: true, want: []string{`sum(a{namespace="ns"})`},
		},
		"by without namespace": {
			expr: `sum by (reason) (a{namespace="ns"})`, keepLabel: true, want: []string{`sum by (reason) (a{namespace="ns"})`},
		},
		"without namespace": {
			expr: `sum without (namespace) (a{namespace="ns"})`, keepLabel: true,
			want: []string{`sum without (namespace) (a{namespace="ns"})`},
		},
		"aggregations not checked": {expr: `sum(a{namespace="ns"})`},
		"a syntax error":           {expr: `sum(`, wantErr: "parse"},
	}
	p := parser.NewParser(parser.Options{})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Unscoped(p, tc.expr, "ns", tc.keepLabel)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestDocumented(t *testing.T) {
	documented := map[string]bool{"a_seconds": true, "b_total": true}
	cases := map[string]bool{
		"a_seconds":          true,
		"a_seconds_bucket":   true,
		"a_seconds_sum":      true,
		"a_seconds_count":    true,
		"b_total":            true,
		"b_total_bucket":     true, // not a histogram, but no series of Portico is named so
		"c_seconds_bucket":   false,
		"a_seconds_quantile": false,
		"b":                  false,
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Documented(name, documented)).To(Equal(want))
		})
	}
}

func TestExpandVariables(t *testing.T) {
	values := map[string]string{"__rate_interval": "2m", "job": "portico"}
	cases := map[string]struct {
		expr, want, wantErr string
	}{
		"no variable":        {expr: `sum(up)`, want: `sum(up)`},
		"$name":              {expr: `rate(x{job="$job"}[$__rate_interval])`, want: `rate(x{job="portico"}[2m])`},
		"${name}":            {expr: `rate(x{job="${job}"}[${__rate_interval}])`, want: `rate(x{job="portico"}[2m])`},
		"${name:format}":     {expr: `x{job=~"${job:regex}"}`, want: `x{job=~"portico"}`},
		"an unknown one":     {expr: `x{namespace="$namespace", job="$job"}`, wantErr: "no value for $namespace"},
		"two unknown ones":   {expr: `x[$__range] offset $__interval`, wantErr: "no value for $__range, $__interval"},
		"a dollar in labels": {expr: `sum by (pod) (x)`, want: `sum by (pod) (x)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ExpandVariables(tc.expr, values)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestDashboardTargets(t *testing.T) {
	g := NewWithT(t)
	targets, err := DashboardTargets([]byte(`{"panels": [
		{"title": "A", "targets": [{"refId": "A", "expr": "up"}, {"refId": "B", "expr": "x"}]},
		{"type": "row", "title": "R", "panels": [{"title": "C", "targets": [{"refId": "A", "expr": "y"}]}]},
		{"type": "text", "title": "T"}
	]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(targets).To(Equal([]Target{
		{Panel: "A", RefID: "A", Expr: "up"}, {Panel: "A", RefID: "B", Expr: "x"}, {Panel: "C", RefID: "A", Expr: "y"},
	}))

	_, err = DashboardTargets([]byte(`{"panels": [{"title": "A", "targets": [{"refId": "A", "expr": " "}]}]}`))
	g.Expect(err).To(MatchError(ContainSubstring(`panel "A", target A: no expr`)))
	_, err = DashboardTargets([]byte(`{"panels": {}}`))
	g.Expect(err).To(HaveOccurred())
}

func TestSectionsAndTables(t *testing.T) {
	const doc = "# Ops\n\n## Metrics\n\n### Mine\n\n| metric | type |\n|---|---|\n" +
		"| `a_total` | counter |\n| `b_seconds{x,y}`, `c`, … | histogram |\n| not code | gauge |\n\n" +
		"#### Sub\n\ntext `d` | x |\n\n### Theirs\n\n| metric | use |\n|---|---|\n| `e` | f |\n\n## Next\n"
	g := NewWithT(t)
	mine, err := Section(doc, "Mine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(TableMetrics(mine)).To(Equal(map[string]bool{"a_total": true, "b_seconds": true, "c": true}))
	metrics, err := Section(doc, "Metrics")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metrics).To(ContainSubstring("`e`"))
	g.Expect(metrics).NotTo(ContainSubstring("Next"))
	g.Expect(Headings(metrics, 3)).To(Equal([]string{"Mine", "Theirs"}))
	g.Expect(Headings(mine, 4)).To(Equal([]string{"Sub"}))
	_, err = Section(doc, "Missing")
	g.Expect(err).To(MatchError(`no section "Missing"`))
}

func TestExpressions(t *testing.T) {
	const rules = `
groups:
  - name: g
    rules:
      - alert: A
        expr: sum(x_total) > 0
      - record: r:y
        expr: rate(y_seconds_bucket[5m])
`
	const dashboard = `{"panels": [{"title": "P", "targets": [{"refId": "A", "expr": "rate(z_total{job=\"$job\"}[$__rate_interval])"}]}]}`
	cases := map[string]struct {
		rules, dashboard string
		want             []Expression
		wantErr          string
	}{
		"rules and dashboard": {rules: rules, dashboard: dashboard, want: []Expression{
			{Where: "rules.yaml, A", Expr: "sum(x_total) > 0", Metrics: []string{"x_total"}},
			{Where: "rules.yaml, r:y", Expr: "rate(y_seconds_bucket[5m])", Metrics: []string{"y_seconds_bucket"}},
			{Where: "dashboard.json, P A", Expr: `rate(z_total{job="portico"}[2m])`, Metrics: []string{"z_total"}},
		}},
		"a rule that reads no metric": {
			rules: "groups: [{name: g, rules: [{alert: A, expr: 'time() > bool 0'}]}]", dashboard: `{"panels": []}`, wantErr: "A: \"time() > bool 0\" reads no metric",
		},
		"a rule that does not parse": {rules: "groups: [{name: g, rules: [{alert: A, expr: 'sum('}]}]", dashboard: `{"panels": []}`, wantErr: "A: parse"},
		"an unknown dashboard variable": {
			rules: "groups: []", dashboard: `{"panels": [{"title": "P", "targets": [{"refId": "B", "expr": "up{x=\"$nope\"}"}]}]}`, wantErr: "P B",
		},
		"rules that are not YAML": {rules: "groups: [", dashboard: dashboard, wantErr: "rules"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Expressions([]byte(tc.rules), []byte(tc.dashboard))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
