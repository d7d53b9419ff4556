package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestFairnessRatios(t *testing.T) {
	tests := []struct {
		name string
		f    fairness
		want map[string]float64
	}{
		{"APIRules: over the flood's convergence",
			fairness{flooded: []time.Duration{ms(100), ms(500), ms(300)}, floodConverged: 10 * time.Second},
			map[string]float64{ratioFloodConvergence: 0.05}},
		{"RateLimits: over one world reconcile",
			fairness{flooded: []time.Duration{ms(900), ms(3000), ms(600)}, worldReconcile: ms(1500)},
			map[string]float64{ratioWorldReconcile: 2, ratioWorldMedian: 0.6}},
		{"over their worst alone",
			fairness{alone: []time.Duration{ms(200), ms(400)}, flooded: []time.Duration{ms(300), ms(1000)}},
			map[string]float64{ratioAlone: 2.5}},
		{"RateLimits: over the flood's convergence, a world reconcile and alone",
			fairness{alone: []time.Duration{ms(100)}, flooded: []time.Duration{ms(400), ms(200)}, floodConverged: 4 * time.Second, worldReconcile: ms(100)},
			map[string]float64{ratioFloodConvergence: 0.1, ratioAlone: 4, ratioWorldReconcile: 4, ratioWorldMedian: 4}},
		{"nothing to divide by", fairness{flooded: []time.Duration{ms(1)}}, map[string]float64{}},
	}
	for _, tt := range tests {
		got := tt.f.ratios()
		if len(got) != len(tt.want) {
			t.Errorf("%s: ratios %v, want %v", tt.name, got, tt.want)
		}
		for k, v := range tt.want {
			if d := got[k] - v; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: %s = %v, want %v", tt.name, k, got[k], v)
			}
		}
	}
}

func TestMeanReconcile(t *testing.T) {
	scrape := func(count int, sum float64) framework.Metrics {
		text := "# TYPE portico_ratelimit_world_seconds histogram\n" +
			"portico_ratelimit_world_seconds_bucket{le=\"+Inf\"} " + itoa(count) + "\n" +
			"portico_ratelimit_world_seconds_sum " + ftoa(sum) + "\n" +
			"portico_ratelimit_world_seconds_count " + itoa(count) + "\n"
		m, err := framework.ParseMetrics(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if d, n := meanReconcile(scrape(10, 5), scrape(14, 11)); d != 1500*time.Millisecond || n != 4 {
		t.Errorf("meanReconcile = %s over %g, want 1.5s over 4", d, n)
	}
	if d, n := meanReconcile(scrape(10, 5), scrape(10, 5)); d != 0 || n != 0 {
		t.Errorf("no reconcile: %s over %g, want none", d, n)
	}
}

// TestInRunBoundsAreRatios: the in-run bounds hold or fail on ratios of
// the run, whatever the machine's speed (every time ×4 changes nothing).
func TestInRunBoundsAreRatios(t *testing.T) {
	for _, slower := range []time.Duration{1, 4} {
		if _, err := loneNote(slower*ms(300), slower*12*time.Second, 200, true); err != nil {
			t.Errorf("lone 0.3s of 12s, ×%d: %v", slower, err)
		}
		if _, err := loneNote(slower*ms(3000), slower*12*time.Second, 200, true); err == nil {
			t.Errorf("lone 3s of 12s (a quarter), ×%d: passed", slower)
		}
		edits := editFigures{requests: 200}
		for i := range 100 {
			edits.latencies = append(edits.latencies, slower*ms(20+i%5))
		}
		if _, err := edits.note(true); err != nil {
			t.Errorf("even edits, ×%d: %v", slower, err)
		}
		edits.latencies[0], edits.latencies[1] = slower*ms(900), slower*ms(900)
		if _, err := edits.note(true); err == nil {
			t.Errorf("two edits 40× the median, ×%d: passed", slower)
		}
	}
	if _, err := loneNote(ms(3000), 12*time.Second, 4, false); err != nil {
		t.Errorf("the short mode gates nothing: %v", err)
	}
}

// TestExemptions: the bench's exemptions make information of exactly the
// figures they name, and no time or CPU figure is ever gated.
func TestExemptions(t *testing.T) {
	tests := []struct {
		labels    map[string]string
		unit, key string
		want      framework.Class
	}{
		{map[string]string{"Metric": "ConvergenceOverFloor", "Controller": "apirule"}, framework.UnitRatio, "Converge", framework.ClassGated},
		{map[string]string{"Metric": "HTTPRouteModeOverIstioMode"}, framework.UnitRatio, "Converge", framework.ClassInfo},
		{map[string]string{"Metric": "HTTPRouteModeOverIstioMode"}, framework.UnitRatio, "RequestsPerObject", framework.ClassGated},
		{map[string]string{"Metric": "APIRequests", "Controller": "apirule"}, framework.UnitRatio, "PerObject", framework.ClassGated},
		{map[string]string{"Metric": "Reconciles", "Controller": "apirule"}, framework.UnitCount, "Idle", framework.ClassGated},
		{map[string]string{"Metric": "Reconciles", "Controller": "ratelimit"}, framework.UnitCount, "Idle", framework.ClassInfo},
		{map[string]string{"Metric": "NoisyNeighbour", "Controller": "ratelimit"}, framework.UnitRatio, ratioWorldReconcile, framework.ClassInfo},
		{map[string]string{"Metric": "NoisyNeighbour", "Controller": "ratelimit"}, framework.UnitMilliseconds, "FloodedMax", framework.ClassInfo},
		{map[string]string{"Metric": "EditRequests", "Controller": "apirule"}, framework.UnitRatio, "PerEdit", framework.ClassGated},
		{map[string]string{"Metric": "CPUUntilConverged", "Controller": "apirule"}, framework.UnitSeconds, "apirule-controller", framework.ClassInfo},
		{map[string]string{"Metric": "PeakMemory", "Controller": "apirule"}, framework.UnitMiB, "RSS", framework.ClassGated},
		{map[string]string{"Metric": "PeakMemory", "Controller": "apirule"}, framework.UnitMiB, "Heap", framework.ClassGated},
		{map[string]string{"Metric": "PeakMemory", "Controller": "ratelimit"}, framework.UnitMiB, "RSS", framework.ClassGated},
		{map[string]string{"Metric": "PeakMemory", "Controller": "ratelimit"}, framework.UnitMiB, "Heap", framework.ClassInfo},
	}
	for _, tt := range tests {
		if got := framework.Classify(tt.labels, tt.unit, tt.key, exemptions); got != tt.want {
			t.Errorf("%v %s %s: %s, want %s", tt.labels, tt.unit, tt.key, got, tt.want)
		}
	}
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// TestFairnessGate: team-a's worst wait under the flood fails the run
// beyond maxFloodShare of the flood's own convergence, for both kinds,
// only when gated; its ratio to the wait alone never does.
func TestFairnessGate(t *testing.T) {
	tests := []struct {
		name    string
		f       fairness
		gate    bool
		wantErr bool
	}{
		{"RateLimits within the share, 9× alone", fairness{kind: "RateLimit", alone: []time.Duration{ms(80)}, flooded: []time.Duration{ms(720)}, floodConverged: 4 * time.Second}, true, false},
		{"RateLimits beyond the share", fairness{kind: "RateLimit", alone: []time.Duration{ms(80)}, flooded: []time.Duration{ms(2100)}, floodConverged: 4 * time.Second}, true, true},
		{"APIRules beyond the share", fairness{kind: "APIRule", alone: []time.Duration{ms(50)}, flooded: []time.Duration{ms(6000)}, floodConverged: 10 * time.Second}, true, true},
		{"beyond the share, short mode", fairness{kind: "RateLimit", alone: []time.Duration{ms(50)}, flooded: []time.Duration{ms(2100)}, floodConverged: 4 * time.Second}, false, false},
	}
	for _, tt := range tests {
		_, err := fairnessNotes([]fairness{tt.f}, tt.gate)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error %v, want error %t", tt.name, err, tt.wantErr)
		}
	}
}
