// Command gobench turns the output of `go test -bench` into PerfData and
// compares it with a baseline, as the other benchmarks of test/perf do:
// `make bench-memory` pipes the operator's CRD cache benchmark through it.
//
// It copies its input to stdout and reads every result line, e.g.
//
//	BenchmarkCRDCacheMemory-2  1  52.1 MiB-heap-500-crds  1843 B-per-crd
//
// Every value becomes a data item labelled with the benchmark's name
// (without the -GOMAXPROCS suffix) and the unit before the first "-" or
// "/" of its metric (MiB, B, ns), keyed by the rest ("heap-500-crds").
// Memory (B, MiB) and allocations (allocs/op) are gated against the
// baseline; times (ns/op) are information only.
//
// Usage:
//
//	go test -bench . ./pkg | go run ./test/perf/gobench [--skip ns/op] --output bin/perf/x.json --baseline test/perf/baseline/x.json
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// benchLine matches a result line: name, -GOMAXPROCS, iterations, values.
var benchLine = regexp.MustCompile(`^(Benchmark\S*?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads `go test -bench` output, copying it to echo; metrics in
// skip are left out.
func parse(r io.Reader, echo io.Writer, skip map[string]bool) (framework.PerfData, error) {
	d := framework.PerfData{Version: framework.PerfDataVersion}
	items := map[string]int{} // benchmark and unit -> index in d.DataItems
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(echo, line)
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			if skip[fields[i+1]] {
				continue
			}
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return d, fmt.Errorf("%q: value %q: %w", line, fields[i], err)
			}
			unit, key := splitMetric(fields[i+1])
			id := m[1] + "\x00" + unit
			if _, ok := items[id]; !ok {
				items[id] = len(d.DataItems)
				d.DataItems = append(d.DataItems, framework.DataItem{
					Data: map[string]float64{}, Unit: unit, Labels: map[string]string{"Metric": m[1]},
				})
			}
			d.DataItems[items[id]].Data[key] = v
		}
	}
	return d, sc.Err()
}

// splitMetric splits a benchmark metric into its unit and the rest:
// "MiB-heap-0-crds" into "MiB" and "heap-0-crds", "ns/op" into "ns" and
// "op".
func splitMetric(metric string) (unit, key string) {
	if i := strings.IndexAny(metric, "-/"); i > 0 {
		return metric[:i], metric[i+1:]
	}
	return metric, "value"
}

func main() {
	o := framework.BenchOptions{Tolerance: framework.DefaultTolerance.Relative}
	fs := flag.NewFlagSet("gobench", flag.ExitOnError)
	o.AddResultFlags(fs)
	skip := map[string]bool{}
	fs.Func("skip", "leave this metric out (e.g. ns/op of a benchmark that measures memory), repeatable", func(m string) error {
		skip[m] = true
		return nil
	})
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	d, err := parse(os.Stdin, os.Stdout, skip)
	if err == nil && len(d.DataItems) == 0 {
		err = errors.New("no benchmark results in the input")
	}
	if err == nil {
		err = o.Publish(os.Stdout, d)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gobench: %v\n", err)
		os.Exit(1)
	}
}
