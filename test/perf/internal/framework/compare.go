package framework

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Tolerance is how far a gated value may exceed its baseline before it
// counts as a regression: by the Relative share of the baseline plus, for
// its unit, Absolute (the noise of small values: one reconcile more or
// less at convergence, a MiB of heap).
type Tolerance struct {
	Relative float64
	Absolute map[string]float64
}

// DefaultTolerance is 15%, so that a ratio or a count 20% worse than its
// baseline fails, with a little absolute noise per unit. Counts get 2:
// whether a late event lands just before or after convergence turns one
// reconcile into two, which is no regression.
var DefaultTolerance = Tolerance{Relative: 0.15, Absolute: map[string]float64{
	UnitCount: 2, UnitRatio: 0.02, UnitMiB: 1,
}}

// Policy is how a run is compared with its baseline: the tolerance of
// gated values and the figures exempt from the gate.
type Policy struct {
	Tolerance Tolerance
	Exempt    []Exemption
}

// Verdict is the outcome of comparing one value with its baseline.
type Verdict string

// The verdicts.
const (
	VerdictOK        Verdict = "ok"
	VerdictRegressed Verdict = "REGRESSED"
	VerdictImproved  Verdict = "improved"
	// VerdictInfo: an informational value, printed beside its baseline
	// and never judged.
	VerdictInfo Verdict = "info"
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
	Class             Class
	Baseline, Current float64
	Verdict           Verdict
}

// ItemName renders an item's labels in a stable order, Metric first, as
// the comparison names it: "Metric=Convergence,Controller=floor".
func ItemName(labels map[string]string) string {
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

// values flattens PerfData into classified comparisons keyed by item, unit
// and key, in order: items as listed, keys sorted.
func values(d PerfData, exempt []Exemption) ([]string, map[string]Comparison) {
	var order []string
	out := map[string]Comparison{}
	for _, item := range d.DataItems {
		name := ItemName(item.Labels)
		for _, k := range slices.Sorted(maps.Keys(item.Data)) {
			id := name + "\x00" + item.Unit + "\x00" + k
			if _, dup := out[id]; !dup {
				order = append(order, id)
			}
			out[id] = Comparison{Item: name, Key: k, Unit: item.Unit, Current: item.Data[k],
				Class: Classify(item.Labels, item.Unit, k, exempt)}
		}
	}
	return order, out
}

// judge is the verdict on a gated value present in both runs. Every value
// is a cost (time, memory, requests, a ratio to a floor): higher is worse.
func judge(baseline, current, slack float64) Verdict {
	switch {
	case current > baseline+slack:
		return VerdictRegressed
	case current < baseline-slack:
		return VerdictImproved
	default:
		return VerdictOK
	}
}

// Compare sets every value of current against the value with the same
// labels, unit and key in baseline. Only gated values get a verdict of
// ok, improved or REGRESSED; informational ones (times, CPU seconds,
// exempt figures) get info. Values of the run come first, in its order,
// then those only the baseline has.
func Compare(baseline, current PerfData, p Policy) []Comparison {
	baseOrder, base := values(baseline, p.Exempt)
	order, cur := values(current, p.Exempt)
	out := make([]Comparison, 0, len(order))
	for _, id := range order {
		c := cur[id]
		b, ok := base[id]
		switch {
		case !ok:
			c.Verdict = VerdictNew
		case c.Class != ClassGated:
			c.Baseline, c.Verdict = b.Current, VerdictInfo
		default:
			c.Baseline = b.Current
			c.Verdict = judge(c.Baseline, c.Current, p.Tolerance.Relative*math.Abs(c.Baseline)+p.Tolerance.Absolute[c.Unit])
		}
		out = append(out, c)
	}
	for _, id := range baseOrder {
		if _, ok := cur[id]; !ok {
			b := base[id]
			b.Baseline, b.Current, b.Verdict = b.Current, 0, VerdictMissing
			out = append(out, b)
		}
	}
	return out
}

// Regressions returns the comparisons that regressed (gated values only).
func Regressions(cs []Comparison) []Comparison {
	var out []Comparison
	for _, c := range cs {
		if c.Verdict == VerdictRegressed {
			out = append(out, c)
		}
	}
	return out
}

// OfClass returns the comparisons of one class, in order.
func OfClass(cs []Comparison, class Class) []Comparison {
	var out []Comparison
	for _, c := range cs {
		if c.Class == class {
			out = append(out, c)
		}
	}
	return out
}

// change is a value's change against its baseline, as a signed
// percentage, or "-".
func change(c Comparison) string {
	if c.Verdict == VerdictNew || c.Verdict == VerdictMissing || c.Baseline == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.0f%%", 100*(c.Current-c.Baseline)/c.Baseline)
}

// WriteComparison writes comparisons as a table.
func WriteComparison(w io.Writer, cs []Comparison) error {
	rows := [][]string{{"item", "value", "unit", "baseline", "run", "change", "verdict"}}
	for _, c := range cs {
		baseline, current := number(c.Baseline), number(c.Current)
		switch c.Verdict {
		case VerdictNew:
			baseline = "-"
		case VerdictMissing:
			current = "-"
		}
		rows = append(rows, []string{c.Item, c.Key, c.Unit, baseline, current, change(c), string(c.Verdict)})
	}
	return WriteTable(w, rows)
}

// WriteReport writes the gated values' table, then the informational
// ones', then the exemptions' reasons.
func WriteReport(w io.Writer, cs []Comparison, p Policy) error {
	fmt.Fprintf(w, "gated (machine-independent: ratios of this run, counts, memory; tolerance %.0f%% plus %s):\n\n",
		100*p.Tolerance.Relative, absoluteSlack(p.Tolerance))
	if err := WriteComparison(w, OfClass(cs, ClassGated)); err != nil {
		return err
	}
	fmt.Fprint(w, "\ninformation (absolute times and CPU seconds, which measure this machine; never gated):\n\n")
	if err := WriteComparison(w, OfClass(cs, ClassInfo)); err != nil {
		return err
	}
	for _, e := range p.Exempt {
		fmt.Fprintf(w, "not gated: %s: %s\n", e, e.Why)
	}
	return nil
}

// absoluteSlack renders the absolute tolerances by unit: "2 count, 1 MiB".
func absoluteSlack(t Tolerance) string {
	var parts []string
	for _, unit := range slices.Sorted(maps.Keys(t.Absolute)) {
		parts = append(parts, number(t.Absolute[unit])+" "+unit)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// number formats a value with at most two decimals, or three significant
// digits below 1 (a ratio of 0.023).
func number(v float64) string {
	if math.Abs(v) < 1 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
