// Command metric-names prints the metric names the chart's alerts and
// dashboard read, one per line, sorted and without duplicates, or with
// --where one line per expression and metric ("<metric>\t<where>"). The
// node e2e compares them with the names Prometheus scraped from the running
// operator and controllers. Run it in the test/monitoring module from any
// directory of the repository: it finds the chart by walking up to go.work's
// or the root go.mod's directory.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/portico-dev/portico/test/monitoring"
)

func main() {
	dir := flag.String("dir", "", "the chart's monitoring files (default: charts/portico/files/monitoring of the repository)")
	where := flag.Bool("where", false, "print each metric with the expression that reads it")
	flag.Parse()
	if err := run(*dir, *where); err != nil {
		fmt.Fprintln(os.Stderr, "metric-names:", err)
		os.Exit(1)
	}
}

func run(dir string, where bool) error {
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "charts", "portico", "files", "monitoring")
	}
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		return err
	}
	dashboard, err := os.ReadFile(filepath.Join(dir, "dashboard.json"))
	if err != nil {
		return err
	}
	exprs, err := monitoring.Expressions(rules, dashboard)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range exprs {
		for _, name := range e.Metrics {
			if where {
				lines = append(lines, name+"\t"+e.Where)
			} else {
				lines = append(lines, name)
			}
		}
	}
	slices.Sort(lines)
	for _, line := range slices.Compact(lines) {
		fmt.Println(line)
	}
	return nil
}

// repoRoot is the nearest directory above the working directory that holds
// the chart.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "charts", "portico", "Chart.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no charts/portico/Chart.yaml above the working directory")
		}
		dir = parent
	}
}
