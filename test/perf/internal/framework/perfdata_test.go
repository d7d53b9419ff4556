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
