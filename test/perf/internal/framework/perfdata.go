package framework

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PerfData is a benchmark's results in the shape of Kubernetes perf-tests'
// PerfData, which their dashboards and tools read.
type PerfData struct {
	Version   string     `json:"version"`
	DataItems []DataItem `json:"dataItems"`
}

// PerfDataVersion is the only PerfData version.
const PerfDataVersion = "v1"

// DataItem is one measured quantity: named values (e.g. Perc50, Perc90,
// Perc99) in one unit, identified by its labels (at least "Metric").
type DataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels,omitempty"`
}

// The units of the benchmarks' data items.
const (
	UnitMilliseconds = "ms"
	UnitSeconds      = "s"
	UnitMiB          = "MiB"
	UnitCount        = "count"
	// UnitRatio is one figure over another of the same run.
	UnitRatio = "ratio"
)

// Milliseconds converts a duration to the unit of latencies.
func Milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MiB converts bytes to the unit of memory.
func MiB(bytes float64) float64 { return bytes / (1 << 20) }

// Percentile is the nearest-rank percentile (0 < p ≤ 1) of sorted samples:
// with fewer than 1/(1-p) samples it is the maximum.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// LatencyItem summarizes latency samples as Perc50, Perc90, Perc99 and Max
// in milliseconds.
func LatencyItem(labels map[string]string, samples []time.Duration) DataItem {
	s := slices.Sorted(slices.Values(samples))
	data := map[string]float64{}
	for name, p := range map[string]float64{"Perc50": 0.50, "Perc90": 0.90, "Perc99": 0.99, "Max": 1} {
		data[name] = Milliseconds(Percentile(s, p))
	}
	return DataItem{Data: data, Unit: UnitMilliseconds, Labels: labels}
}

// ReadPerfData reads a PerfData file.
func ReadPerfData(path string) (PerfData, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return PerfData{}, err
	}
	var d PerfData
	if err := json.Unmarshal(raw, &d); err != nil {
		return PerfData{}, fmt.Errorf("parse %s: %w", path, err)
	}
	if d.Version != PerfDataVersion {
		return PerfData{}, fmt.Errorf("%s: PerfData version %q, want %q", path, d.Version, PerfDataVersion)
	}
	return d, nil
}

// WritePerfData writes d to path (creating its directory), indented.
func WritePerfData(path string, d PerfData) error {
	raw, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// Tolerance is how far a value may exceed its baseline before it counts as
// a regression: by the Relative share of the baseline plus, for its unit,
// Absolute (the noise of small values, a few milliseconds of a p99 say).
type Tolerance struct {
	Relative float64
	Absolute map[string]float64
}

// DefaultTolerance suits runs on one developer machine: 30% and a little
// absolute noise per unit. Counts get 2: whether a late event lands just
// before or after convergence turns one reconcile into two, which is no
// regression.
var DefaultTolerance = Tolerance{Relative: 0.3, Absolute: map[string]float64{
	UnitMilliseconds: 20, UnitSeconds: 1, UnitMiB: 1, UnitCount: 2, UnitRatio: 0.1,
}}

// Verdict is the outcome of comparing one value with its baseline.
type Verdict string

// The verdicts.
const (
	VerdictOK        Verdict = "ok"
	VerdictRegressed Verdict = "REGRESSED"
	VerdictImproved  Verdict = "improved"
	// VerdictNew: the value has no baseline; VerdictMissing: the baseline
	// has a value the run does not.
	VerdictNew     Verdict = "new"
	VerdictMissing Verdict = "missing"
)

// Comparison is one value of a run against its baseline.
type Comparison struct {
	// Item names the data item by its labels ("Metric=...,...").
	Item string
	// Key is the value's name in the item's data (e.g. "Perc99").
	Key               string
	Unit              string
	Baseline, Current float64
	Verdict           Verdict
}

// itemName renders labels in a stable order, Metric first.
func itemName(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	slices.SortStableFunc(keys, func(a, b string) int {
		return boolRank(a != "Metric") - boolRank(b != "Metric")
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// values flattens PerfData into comparisons keyed by item, unit and key,
// in order: items as listed, keys sorted.
func values(d PerfData) ([]string, map[string]Comparison) {
	var order []string
	out := map[string]Comparison{}
	for _, item := range d.DataItems {
		name := itemName(item.Labels)
		for _, k := range slices.Sorted(maps.Keys(item.Data)) {
			id := name + "\x00" + item.Unit + "\x00" + k
			if _, dup := out[id]; !dup {
				order = append(order, id)
			}
			out[id] = Comparison{Item: name, Key: k, Unit: item.Unit, Current: item.Data[k]}
		}
	}
	return order, out
}

// Compare sets every value of current against the value with the same
// labels, unit and key in baseline. Every value is a cost (time, memory,
// requests): higher is worse. Values of the run come first, in its order,
// then those only the baseline has.
func Compare(baseline, current PerfData, tol Tolerance) []Comparison {
	baseOrder, base := values(baseline)
	order, cur := values(current)
	out := make([]Comparison, 0, len(order))
	for _, id := range order {
		c := cur[id]
		b, ok := base[id]
		if !ok {
			c.Verdict = VerdictNew
			out = append(out, c)
			continue
		}
		c.Baseline = b.Current
		slack := tol.Relative*math.Abs(c.Baseline) + tol.Absolute[c.Unit]
		switch {
		case c.Current > c.Baseline+slack:
			c.Verdict = VerdictRegressed
		case c.Current < c.Baseline-slack:
			c.Verdict = VerdictImproved
		default:
			c.Verdict = VerdictOK
		}
		out = append(out, c)
	}
	for _, id := range baseOrder {
		if _, ok := cur[id]; !ok {
			b := base[id]
			out = append(out, Comparison{Item: b.Item, Key: b.Key, Unit: b.Unit, Baseline: b.Current, Verdict: VerdictMissing})
		}
	}
	return out
}

// Regressions returns the comparisons that regressed.
func Regressions(cs []Comparison) []Comparison {
	var out []Comparison
	for _, c := range cs {
		if c.Verdict == VerdictRegressed {
			out = append(out, c)
		}
	}
	return out
}

// WriteComparison writes comparisons as a table.
func WriteComparison(w io.Writer, cs []Comparison) error {
	rows := [][]string{{"item", "value", "unit", "baseline", "run", "change", "verdict"}}
	for _, c := range cs {
		baseline, current, change := number(c.Baseline), number(c.Current), "-"
		switch c.Verdict {
		case VerdictNew:
			baseline = "-"
		case VerdictMissing:
			current = "-"
		default:
			if c.Baseline != 0 {
				change = fmt.Sprintf("%+.0f%%", 100*(c.Current-c.Baseline)/c.Baseline)
			}
		}
		rows = append(rows, []string{c.Item, c.Key, c.Unit, baseline, current, change, string(c.Verdict)})
	}
	return WriteTable(w, rows)
}

// number formats a value with at most two decimals.
func number(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }
