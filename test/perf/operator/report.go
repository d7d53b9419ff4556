package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// latencyTarget is every reaction's p99 target.
const latencyTarget = 100 * time.Millisecond

// msSince formats the time from t0 to t, for --verbose timelines.
func msSince(t0, t time.Time) string { return ms(t.Sub(t0)) }

// seenAfter formats when the waiter's event came after t0, or "-".
func seenAfter(t0 time.Time, w *waiter) string {
	select {
	case e := <-w.ch:
		return msSince(t0, e.At)
	default:
		return "-"
	}
}

// stamp formats a time like the operator's log (UTC), for --verbose.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

func ms(d time.Duration) string { return framework.FormatMilliseconds(d) }

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// latencies are the three reactions, in the order of the table.
func (r results) latencies() []struct {
	metric, name string
	samples      []time.Duration
} {
	return []struct {
		metric, name string
		samples      []time.Duration
	}{
		{"CRDEstablishedToDeploymentCreated", "(a) CRD Established -> Deployment created", r.created},
		{"DeploymentDeletedToRecreated", "(b) Deployment deleted -> recreated", r.recreated},
		{"CRDDeletedToDeploymentGone", "(c) CRD deleted -> Deployment gone", r.gone},
	}
}

// floors are the floors of (a) and (c), each beside the reaction it is the
// floor of.
func (r results) floors() []struct {
	metric, name string
	samples      []time.Duration
	of           []time.Duration
} {
	return []struct {
		metric, name string
		samples      []time.Duration
		of           []time.Duration
	}{
		{"CRDEstablishedToDeploymentCreatedFloor", "(a) floor: the bench creates a Deployment", r.createdFloor, r.created},
		{"CRDDeletedToDeploymentGoneFloor", "(c) floor: the bench deletes a Deployment", r.goneFloor, r.gone},
	}
}

// overFloor is the p99 of samples over the p99 of floor (0 without a
// floor).
func overFloor(samples, floor []time.Duration) float64 {
	f := framework.Percentile(slices.Sorted(slices.Values(floor)), 0.99)
	if f <= 0 {
		return 0
	}
	return float64(framework.Percentile(slices.Sorted(slices.Values(samples)), 0.99)) / float64(f)
}

// WriteTable writes each reaction's percentiles against the target, and
// the steady-state writes.
func (r results) WriteTable(w io.Writer) error {
	rows := [][]string{{"metric", "p50", "p99", "max", "n", "target", "pass"}}
	for _, m := range r.latencies() {
		s := slices.Sorted(slices.Values(m.samples))
		p99 := framework.Percentile(s, 0.99)
		rows = append(rows, []string{m.name, ms(framework.Percentile(s, 0.50)), ms(p99), ms(s[len(s)-1]),
			strconv.Itoa(len(s)), "p99 < " + ms(latencyTarget), passFail(p99 < latencyTarget)})
	}
	for _, f := range r.floors() {
		if len(f.samples) == 0 {
			continue
		}
		s := slices.Sorted(slices.Values(f.samples))
		rows = append(rows, []string{f.name, ms(framework.Percentile(s, 0.50)), ms(framework.Percentile(s, 0.99)), ms(s[len(s)-1]),
			strconv.Itoa(len(s)), fmt.Sprintf("p99 %.2fx floor (goal 2x)", overFloor(f.of, f.samples)), "-"})
	}
	total := r.writes.total()
	rows = append(rows, []string{fmt.Sprintf("(d) API writes in %s of steady state", r.steady), "-", "-",
		strconv.FormatFloat(total, 'f', -1, 64), "1", "0", passFail(total == 0)})
	if err := framework.WriteTable(w, rows); err != nil {
		return err
	}
	if total != 0 {
		var methods []string
		for _, m := range slices.Sorted(maps.Keys(r.writes)) {
			methods = append(methods, fmt.Sprintf("%s %g", m, r.writes[m]))
		}
		fmt.Fprintf(w, "\n(d) writes by method: %s\n", strings.Join(methods, ", "))
	}
	return nil
}

// PerfData is each reaction's percentiles and the steady-state writes by
// method.
func (r results) PerfData() framework.PerfData {
	var d framework.PerfData
	for _, m := range r.latencies() {
		d.DataItems = append(d.DataItems, framework.LatencyItem(map[string]string{"Metric": m.metric}, m.samples))
	}
	for _, f := range r.floors() {
		if len(f.samples) == 0 {
			continue
		}
		// Information only: a p99 of 30 samples is their maximum, which one
		// pause of the API server sets, so its ratio to the floor's is not
		// gated (the table prints it).
		d.DataItems = append(d.DataItems, framework.LatencyItem(map[string]string{"Metric": f.metric}, f.samples))
	}
	writes := maps.Clone(r.writes)
	writes["Total"] = r.writes.total()
	d.DataItems = append(d.DataItems, framework.DataItem{
		Labels: map[string]string{"Metric": "SteadyStateWrites", "Window": r.steady.String()},
		Unit:   framework.UnitCount, Data: writes,
	})
	return d
}
