package framework

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func item(unit string, data map[string]float64, labels ...string) DataItem {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return DataItem{Data: data, Unit: unit, Labels: l}
}

func perf(items ...DataItem) PerfData { return PerfData{Version: PerfDataVersion, DataItems: items} }

func TestCompare(t *testing.T) {
	tol := Tolerance{Relative: 0.2, Absolute: map[string]float64{UnitMilliseconds: 5}}
	latency := func(p50, p99 float64) DataItem {
		return item(UnitMilliseconds, map[string]float64{"Perc50": p50, "Perc99": p99}, "Metric", "Latency", "Phase", "a")
	}
	tests := []struct {
		name     string
		baseline PerfData
		current  PerfData
		want     []Comparison
	}{
		{
			name:     "within the relative tolerance and the absolute slack",
			baseline: perf(latency(10, 100)),
			current:  perf(latency(17, 125)),
			want: []Comparison{
				{Item: "Metric=Latency,Phase=a", Key: "Perc50", Unit: "ms", Baseline: 10, Current: 17, Verdict: VerdictOK},
				{Item: "Metric=Latency,Phase=a", Key: "Perc99", Unit: "ms", Baseline: 100, Current: 125, Verdict: VerdictOK},
			},
		},
		{
			name:     "beyond the tolerance in both directions",
			baseline: perf(latency(10, 100)),
			current:  perf(latency(2, 126)),
			want: []Comparison{
				{Item: "Metric=Latency,Phase=a", Key: "Perc50", Unit: "ms", Baseline: 10, Current: 2, Verdict: VerdictImproved},
				{Item: "Metric=Latency,Phase=a", Key: "Perc99", Unit: "ms", Baseline: 100, Current: 126, Verdict: VerdictRegressed},
			},
		},
		{
			name:     "a count without slack: one write where there were none regresses",
			baseline: perf(item(UnitCount, map[string]float64{"Total": 0}, "Metric", "Writes")),
			current:  perf(item(UnitCount, map[string]float64{"Total": 1}, "Metric", "Writes")),
			want:     []Comparison{{Item: "Metric=Writes", Key: "Total", Unit: "count", Current: 1, Verdict: VerdictRegressed}},
		},
		{
			name:     "labels identify an item whatever their order; other labels or units are other items",
			baseline: perf(item(UnitCount, map[string]float64{"n": 1}, "Objects", "10", "Metric", "M"), item(UnitMiB, map[string]float64{"n": 1}, "Metric", "M")),
			current:  perf(item(UnitCount, map[string]float64{"n": 1}, "Metric", "M", "Objects", "10"), item(UnitCount, map[string]float64{"n": 1}, "Metric", "M")),
			want: []Comparison{
				{Item: "Metric=M,Objects=10", Key: "n", Unit: "count", Baseline: 1, Current: 1, Verdict: VerdictOK},
				{Item: "Metric=M", Key: "n", Unit: "count", Current: 1, Verdict: VerdictNew},
				{Item: "Metric=M", Key: "n", Unit: "MiB", Baseline: 1, Verdict: VerdictMissing},
			},
		},
		{
			name:     "an empty baseline makes every value new",
			baseline: perf(),
			current:  perf(item(UnitSeconds, map[string]float64{"b": 2, "a": 1}, "Metric", "T")),
			want: []Comparison{
				{Item: "Metric=T", Key: "a", Unit: "s", Current: 1, Verdict: VerdictNew},
				{Item: "Metric=T", Key: "b", Unit: "s", Current: 2, Verdict: VerdictNew},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(tt.baseline, tt.current, tol)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compare:\n got %+v\nwant %+v", got, tt.want)
			}
		})
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
		if got := Compare(reconciles(1), reconciles(tt.current), DefaultTolerance)[0].Verdict; got != tt.want {
			t.Errorf("1 -> %v reconciles: %s, want %s", tt.current, got, tt.want)
		}
	}
}

func TestRegressionsAndTable(t *testing.T) {
	cs := Compare(perf(item(UnitCount, map[string]float64{"a": 10, "b": 10}, "Metric", "M")),
		perf(item(UnitCount, map[string]float64{"a": 10, "b": 14}, "Metric", "M")), Tolerance{Relative: 0.5})
	if r := Regressions(cs); len(r) != 0 {
		t.Errorf("Regressions within 50%%: %+v", r)
	}
	cs = Compare(perf(item(UnitCount, map[string]float64{"a": 10, "b": 10}, "Metric", "M")),
		perf(item(UnitCount, map[string]float64{"a": 10, "b": 20}, "Metric", "M")), Tolerance{Relative: 0.2})
	if r := Regressions(cs); len(r) != 1 || r[0].Key != "b" {
		t.Errorf("Regressions: %+v, want b", r)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, cs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "+100%") || !strings.Contains(buf.String(), string(VerdictRegressed)) {
		t.Errorf("comparison table lacks the change or the verdict:\n%s", buf.String())
	}
}

func TestLatencyItemAndRoundTrip(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	got := LatencyItem(map[string]string{"Metric": "L"}, samples)
	want := map[string]float64{"Perc50": 50, "Perc90": 90, "Perc99": 99, "Max": 100}
	if !reflect.DeepEqual(got.Data, want) || got.Unit != UnitMilliseconds {
		t.Errorf("LatencyItem = %+v, want %v ms", got, want)
	}
	if p := Percentile([]time.Duration{time.Second}, 0.99); p != time.Second {
		t.Errorf("Percentile of one sample = %s", p)
	}
	path := filepath.Join(t.TempDir(), "sub", "perf.json")
	if err := WritePerfData(path, perf(got)); err != nil {
		t.Fatal(err)
	}
	back, err := ReadPerfData(path)
	if err != nil || !reflect.DeepEqual(back, perf(got)) {
		t.Errorf("ReadPerfData = %+v, %v", back, err)
	}
}

func TestPublishWithoutBaselineFile(t *testing.T) {
	dir := t.TempDir()
	d := perf(item(UnitMilliseconds, map[string]float64{"Converge": 1}, "Metric", "Convergence"))
	var out bytes.Buffer
	missing := filepath.Join(dir, "controllers-10k.json")
	if err := (BenchOptions{Output: filepath.Join(dir, "out.json"), Baseline: missing, Tolerance: 0.3}).Publish(&out, d); err != nil {
		t.Fatalf("no baseline file: %v, want the results reported without comparison", err)
	}
	if !strings.Contains(out.String(), "no baseline "+missing) {
		t.Errorf("output %q does not say there is no baseline", out.String())
	}
	// A baseline file that exists but cannot be read still fails.
	if err := os.WriteFile(missing, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (BenchOptions{Baseline: missing, Tolerance: 0.3}).Publish(&out, d); err == nil {
		t.Error("a broken baseline file passed")
	}
}
