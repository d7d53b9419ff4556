package monitoring

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Target is one query of a Grafana dashboard panel.
type Target struct {
	Panel string
	RefID string
	Expr  string
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// DashboardTargets returns every query of a Grafana dashboard, those of the
// panels inside rows included. A target without an expression is an error.
func DashboardTargets(dashboard []byte) ([]Target, error) {
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []Target
	var walk func([]panel) error
	walk = func(panels []panel) error {
		for _, p := range panels {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("panel %q, target %s: no expr", p.Title, t.RefID)
				}
				out = append(out, Target{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(d.Panels)
}

// grafanaVariable matches $name, ${name} and ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$(?:\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|([A-Za-z0-9_]+))`)

// ExpandVariables replaces the Grafana variables of a query with the values
// given (e.g. $__rate_interval with 2m), so that Prometheus's parser can read
// it as Grafana would send it. A variable without a value is an error.
func ExpandVariables(expr string, values map[string]string) (string, error) {
	var missing []string
	out := grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVariable.FindStringSubmatch(v)
		name := m[1] + m[2]
		value, ok := values[name]
		if !ok {
			missing = append(missing, v)
			return v
		}
		return value
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q: no value for %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}
