package framework

import (
	"bytes"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	p := Policy{Tolerance: Tolerance{Relative: 0.2, Absolute: map[string]float64{UnitRatio: 0.05}}}
	ratio := func(converge, requests float64) DataItem {
		return item(UnitRatio, map[string]float64{"Converge": converge, "Requests": requests}, "Metric", "OverFloor", "Phase", "a")
	}
	tests := []struct {
		name     string
		baseline PerfData
		current  PerfData
		want     []Comparison
	}{
		{
			name:     "within the relative tolerance and the absolute slack",
			baseline: perf(ratio(1, 2)),
			current:  perf(ratio(1.25, 2.4)),
			want: []Comparison{
				{Item: "Metric=OverFloor,Phase=a", Key: "Converge", Unit: "ratio", Class: ClassGated, Baseline: 1, Current: 1.25, Verdict: VerdictOK},
				{Item: "Metric=OverFloor,Phase=a", Key: "Requests", Unit: "ratio", Class: ClassGated, Baseline: 2, Current: 2.4, Verdict: VerdictOK},
			},
		},
		{
			name:     "beyond the tolerance in both directions",
			baseline: perf(ratio(1, 2)),
			current:  perf(ratio(0.5, 2.5)),
			want: []Comparison{
				{Item: "Metric=OverFloor,Phase=a", Key: "Converge", Unit: "ratio", Class: ClassGated, Baseline: 1, Current: 0.5, Verdict: VerdictImproved},
				{Item: "Metric=OverFloor,Phase=a", Key: "Requests", Unit: "ratio", Class: ClassGated, Baseline: 2, Current: 2.5, Verdict: VerdictRegressed},
			},
		},
		{
			name:     "a time is information, however far from its baseline",
			baseline: perf(item(UnitMilliseconds, map[string]float64{"Perc99": 10}, "Metric", "Latency")),
			current:  perf(item(UnitMilliseconds, map[string]float64{"Perc99": 100}, "Metric", "Latency")),
			want:     []Comparison{{Item: "Metric=Latency", Key: "Perc99", Unit: "ms", Class: ClassInfo, Baseline: 10, Current: 100, Verdict: VerdictInfo}},
		},
		{
			name:     "a count without slack: one write where there were none regresses",
			baseline: perf(item(UnitCount, map[string]float64{"Total": 0}, "Metric", "Writes")),
			current:  perf(item(UnitCount, map[string]float64{"Total": 1}, "Metric", "Writes")),
			want:     []Comparison{{Item: "Metric=Writes", Key: "Total", Unit: "count", Class: ClassGated, Current: 1, Verdict: VerdictRegressed}},
		},
		{
			name:     "labels identify an item whatever their order; other labels or units are other items",
			baseline: perf(item(UnitCount, map[string]float64{"n": 1}, "Objects", "10", "Metric", "M"), item(UnitMiB, map[string]float64{"n": 1}, "Metric", "M")),
			current:  perf(item(UnitCount, map[string]float64{"n": 1}, "Metric", "M", "Objects", "10"), item(UnitCount, map[string]float64{"n": 1}, "Metric", "M")),
			want: []Comparison{
				{Item: "Metric=M,Objects=10", Key: "n", Unit: "count", Class: ClassGated, Baseline: 1, Current: 1, Verdict: VerdictOK},
				{Item: "Metric=M", Key: "n", Unit: "count", Class: ClassGated, Current: 1, Verdict: VerdictNew},
				{Item: "Metric=M", Key: "n", Unit: "MiB", Class: ClassGated, Baseline: 1, Verdict: VerdictMissing},
			},
		},
		{
			name:     "an empty baseline makes every value new",
			baseline: perf(),
			current:  perf(item(UnitSeconds, map[string]float64{"b": 2, "a": 1}, "Metric", "T")),
			want: []Comparison{
				{Item: "Metric=T", Key: "a", Unit: "s", Class: ClassInfo, Current: 1, Verdict: VerdictNew},
				{Item: "Metric=T", Key: "b", Unit: "s", Class: ClassInfo, Current: 2, Verdict: VerdictNew},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(tt.baseline, tt.current, p)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compare:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	exempt := []Exemption{
		{Metric: "Modes", Key: "Converge", Why: "floors"},
		{Metric: "Fair", Unit: UnitRatio, Why: "few samples"},
		{Metric: "Reconciles", Labels: map[string]string{"Controller": "ratelimit"}, Why: "one key"},
	}
	tests := []struct {
		labels    []string
		unit, key string
		want      Class
	}{
		{[]string{"Metric", "Convergence"}, UnitMilliseconds, "Converge", ClassInfo},
		{[]string{"Metric", "CPU"}, UnitSeconds, "etcd", ClassInfo},
		{[]string{"Metric", "BenchmarkX"}, UnitNanoseconds, "op", ClassInfo},
		{[]string{"Metric", "OverFloor"}, UnitRatio, "Converge", ClassGated},
		{[]string{"Metric", "APIRequests"}, UnitCount, "POST", ClassGated},
		{[]string{"Metric", "BenchmarkX"}, UnitAllocs, "op", ClassGated},
		{[]string{"Metric", "BenchmarkX"}, UnitBytes, "op", ClassGated},
		{[]string{"Metric", "PeakMemory"}, UnitMiB, "RSS", ClassGated},
		{[]string{"Metric", "Odd"}, "furlongs", "n", ClassInfo},
		{[]string{"Metric", "Modes"}, UnitRatio, "Converge", ClassInfo},
		{[]string{"Metric", "Modes"}, UnitRatio, "RequestsPerObject", ClassGated},
		{[]string{"Metric", "Fair"}, UnitRatio, "FloodedMax", ClassInfo},
		{[]string{"Metric", "Fair"}, UnitCount, "Samples", ClassGated},
		{[]string{"Metric", "Reconciles", "Controller", "ratelimit"}, UnitCount, "Idle", ClassInfo},
		{[]string{"Metric", "Reconciles", "Controller", "apirule"}, UnitCount, "Idle", ClassGated},
	}
	for _, tt := range tests {
		labels := item("", nil, tt.labels...).Labels
		if got := Classify(labels, tt.unit, tt.key, exempt); got != tt.want {
			t.Errorf("Classify(%v, %s, %s) = %s, want %s", labels, tt.unit, tt.key, got, tt.want)
		}
	}
}

// benchRun is a run shaped like bench-controllers': times and CPU seconds
// of the floor and the phase, their ratio, requests, reconciles, memory.
func benchRun() PerfData {
	return perf(
		item(UnitMilliseconds, map[string]float64{"Create": 9990, "Converge": 9991}, "Metric", "Convergence", "Controller", "floor"),
		item(UnitSeconds, map[string]float64{"kube-apiserver": 14.3, "etcd": 2.8}, "Metric", "CPUUntilConverged", "Controller", "floor"),
		item(UnitMilliseconds, map[string]float64{"Create": 4526, "Converge": 12502}, "Metric", "Convergence", "Controller", "apirule"),
		item(UnitSeconds, map[string]float64{"apirule-controller": 4.3, "kube-apiserver": 15.7}, "Metric", "CPUUntilConverged", "Controller", "apirule"),
		item(UnitMilliseconds, map[string]float64{"Perc50": 19, "Perc99": 25.9, "Max": 28.5}, "Metric", "EditLatency", "Controller", "apirule"),
		item(UnitRatio, map[string]float64{"Converge": 1.25, "RequestsPerObject": 1.0003}, "Metric", "ConvergenceOverFloor", "Controller", "apirule"),
		item(UnitCount, map[string]float64{"POST": 2502, "PATCH": 1001, "Total": 3503}, "Metric", "APIRequests", "Controller", "apirule"),
		item(UnitRatio, map[string]float64{"PerObject": 3.503}, "Metric", "APIRequests", "Controller", "apirule"),
		item(UnitCount, map[string]float64{"AtConvergence": 1000, "Idle": 1001}, "Metric", "Reconciles", "Controller", "apirule"),
		item(UnitCount, map[string]float64{"Writes": 0, "GET": 18}, "Metric", "RestartRequests", "Controller", "apirule"),
		item(UnitMiB, map[string]float64{"RSS": 90, "Heap": 49.4}, "Metric", "PeakMemory", "Controller", "apirule"),
	)
}

// scaled is d with every value of the units in units multiplied by f.
func scaled(d PerfData, f float64, units ...string) PerfData {
	out := PerfData{Version: d.Version}
	for _, it := range d.DataItems {
		data := maps.Clone(it.Data)
		for _, u := range units {
			if it.Unit == u {
				for k := range data {
					data[k] *= f
				}
			}
		}
		out.DataItems = append(out.DataItems, DataItem{Data: data, Unit: it.Unit, Labels: it.Labels})
	}
	return out
}

// worse is d with one value multiplied by f.
func worse(d PerfData, metric, key string, f float64) PerfData {
	out := scaled(d, 1)
	for _, it := range out.DataItems {
		if _, ok := it.Data[key]; ok && it.Labels["Metric"] == metric {
			it.Data[key] *= f
		}
	}
	return out
}

// TestCompareOnAFasterOrSlowerMachine: the same results on a machine twice
// as slow (every time and CPU second ×2) or twice as fast (×0.5) pass the
// default gate; every time is reported, none judged.
func TestCompareOnAFasterOrSlowerMachine(t *testing.T) {
	p := Policy{Tolerance: DefaultTolerance}
	for _, f := range []float64{2, 0.5} {
		cs := Compare(benchRun(), scaled(benchRun(), f, UnitMilliseconds, UnitSeconds), p)
		if r := Regressions(cs); len(r) != 0 {
			t.Errorf("times ×%g: regressions %+v, want none", f, r)
		}
		for _, c := range cs {
			if c.Class == ClassInfo && c.Verdict != VerdictInfo || c.Class == ClassGated && c.Verdict != VerdictOK {
				t.Errorf("times ×%g: %s %s %s, want info for times and ok for the rest", f, c.Item, c.Key, c.Verdict)
			}
		}
		if n := len(OfClass(cs, ClassInfo)); n != 11 {
			t.Errorf("times ×%g: %d informational values, want the 11 times and CPU seconds", f, n)
		}
	}
}

// TestCompareTwentyPercentWorse: a ratio to the floor, a request count, a
// reconcile count or peak memory 20% worse fails the default gate, on
// this machine or on one twice as slow.
func TestCompareTwentyPercentWorse(t *testing.T) {
	p := Policy{Tolerance: DefaultTolerance}
	for _, tt := range []struct{ metric, key string }{
		{"ConvergenceOverFloor", "Converge"},
		{"ConvergenceOverFloor", "RequestsPerObject"},
		{"APIRequests", "Total"},
		{"APIRequests", "PerObject"},
		{"Reconciles", "AtConvergence"},
		{"PeakMemory", "RSS"},
	} {
		for _, slower := range []float64{1, 2} {
			run := worse(scaled(benchRun(), slower, UnitMilliseconds, UnitSeconds), tt.metric, tt.key, 1.2)
			r := Regressions(Compare(benchRun(), run, p))
			if len(r) != 1 || !strings.Contains(r[0].Item, "Metric="+tt.metric) || r[0].Key != tt.key {
				t.Errorf("%s %s 20%% worse, times ×%g: regressions %+v, want exactly that value", tt.metric, tt.key, slower, r)
			}
		}
	}
}

// TestDefaultToleranceOfSmallCounts: one reconcile more at convergence (a
// late event landing before it, not after) is noise; three more are not.
func TestDefaultToleranceOfSmallCounts(t *testing.T) {
	reconciles := func(n float64) PerfData {
		return perf(item(UnitCount, map[string]float64{"AtConvergence": n}, "Metric", "Reconciles"))
	}
	for _, tt := range []struct {
		current float64
		want    Verdict
	}{{2, VerdictOK}, {3, VerdictOK}, {4, VerdictRegressed}} {
		if got := Compare(reconciles(1), reconciles(tt.current), Policy{Tolerance: DefaultTolerance})[0].Verdict; got != tt.want {
			t.Errorf("1 -> %v reconciles: %s, want %s", tt.current, got, tt.want)
		}
	}
}

func TestWriteReport(t *testing.T) {
	p := Policy{Tolerance: DefaultTolerance, Exempt: []Exemption{{Metric: "ConvergenceOverFloor", Key: "RequestsPerObject", Why: "for the test"}}}
	cs := Compare(benchRun(), worse(scaled(benchRun(), 2, UnitMilliseconds), "APIRequests", "Total", 2), p)
	var buf bytes.Buffer
	if err := WriteReport(&buf, cs, p); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	gated, info, ok := strings.Cut(out, "information (")
	if !ok {
		t.Fatalf("no informational table:\n%s", out)
	}
	for _, want := range []string{"tolerance 15% plus 1 MiB, 2 count, 0.02 ratio", "+100%", string(VerdictRegressed), "APIRequests"} {
		if !strings.Contains(gated, want) {
			t.Errorf("gated table lacks %q:\n%s", want, gated)
		}
	}
	for _, want := range []string{"Metric=Convergence,Controller=apirule", "+100%", string(VerdictInfo),
		"not gated: Metric=ConvergenceOverFloor RequestsPerObject: for the test"} {
		if !strings.Contains(info, want) {
			t.Errorf("informational part lacks %q:\n%s", want, info)
		}
	}
	if strings.Contains(gated, "CPUUntilConverged") {
		t.Errorf("a CPU figure in the gated table:\n%s", gated)
	}
}
