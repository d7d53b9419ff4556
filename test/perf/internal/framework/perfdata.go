package framework

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// PerfData is a benchmark's results in the shape of Kubernetes perf-tests'
// PerfData, which their dashboards and tools read.
type PerfData struct {
	Version string `json:"version"`
	// Machine is where the results were measured (a field perf-tests'
	// tools ignore); baselines written before it existed have none.
	Machine   *Machine   `json:"machine,omitempty"`
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
	UnitNanoseconds  = "ns"
	UnitMiB          = "MiB"
	UnitBytes        = "B"
	UnitCount        = "count"
	// UnitAllocs is allocations (per operation, from go test -benchmem).
	UnitAllocs = "allocs"
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
		return PerfData{}, fmt.Errorf("read %s: %w", path, err)
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
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
