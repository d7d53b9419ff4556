package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// reconcileNote: reconciles at convergence and once idle, by result, and
// their mean duration, all since before (the phase's start).
func reconcileNote(m, before framework.Metrics, res *result) string {
	byResult := since(m.ByLabel(reconcileTotal, "result"), before.ByLabel(reconcileTotal, "result"))
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(byResult)) {
		if byResult[r] != 0 {
			parts = append(parts, fmt.Sprintf("%s %g", r, byResult[r]))
		}
	}
	mean := "-"
	count, sum := m.HistogramTotals(reconcileTime)
	count0, sum0 := before.HistogramTotals(reconcileTime)
	if count > count0 {
		mean = fmt.Sprintf("%.1fms", 1000*(sum-sum0)/float64(count-count0))
	}
	return fmt.Sprintf("reconciles: %g at convergence, %g once idle (%s), mean %s each",
		res.reconcilesAtConvergence, res.reconciles, strings.Join(parts, ", "), mean)
}

// requestNote: API requests by method, and per object created.
func requestNote(res *result) string {
	var parts []string
	for _, method := range slices.Sorted(maps.Keys(res.requests)) {
		parts = append(parts, fmt.Sprintf("%s %g", method, res.requests[method]))
	}
	return fmt.Sprintf("API requests: %s; %.2f per object", strings.Join(parts, ", "), res.requestsPerObject())
}

// label names the phase's controller and, for APIRules, their mode.
func (r *result) label() string {
	if r.mode == "" {
		return r.controller
	}
	return fmt.Sprintf("%s (%s mode)", r.controller, r.mode)
}

// requestItems are the phase's API requests: a count by method and in
// total, and their number per object created (a ratio of two counts: the
// count's absolute slack of a few requests would hide 20% more of them).
func (r *result) requestItems(labels map[string]string) []framework.DataItem {
	requests := maps.Clone(r.requests)
	if requests == nil {
		requests = map[string]float64{}
	}
	var total float64
	for _, v := range r.requests {
		total += v
	}
	requests["Total"] = total
	return []framework.DataItem{
		{Labels: labels, Unit: framework.UnitCount, Data: requests},
		{Labels: labels, Unit: framework.UnitRatio, Data: map[string]float64{"PerObject": r.requestsPerObject()}},
	}
}

// requestsPerObject is the phase's API requests per object created.
func (r *result) requestsPerObject() float64 {
	var total float64
	for _, v := range r.requests {
		total += v
	}
	return total / float64(max(r.count, 1))
}

// WriteTable writes one row per controller, then their notes.
func (res results) WriteTable(w io.Writer) error {
	rows := [][]string{{"controller", "objects", "create time", "converge time", "reconciles", "peak RSS", "peak heap"}}
	for _, r := range res {
		row := []string{r.controller, r.objects, framework.FormatSeconds(r.create), framework.FormatSeconds(r.converge), "-", "-", "-"}
		if r.controller != floorController { // no process of its own
			row[4], row[5], row[6] = fmt.Sprintf("%g", r.reconciles), framework.FormatMiB(r.peakRSS), framework.FormatMiB(r.peakHeap)
		}
		rows = append(rows, row)
	}
	if err := framework.WriteTable(w, rows); err != nil {
		return err
	}
	fmt.Fprint(w, "\ncreate: first create call until the last returned; converge: first create call until converged.\n"+
		"peak RSS: VmHWM of the process; peak heap: largest sampled go_memstats_heap_inuse_bytes.\n"+
		"floor: the bench itself writes what the apirule controller would (its golden objects and statuses), no controller running.\n")
	for _, r := range res {
		for _, n := range r.notes {
			fmt.Fprintf(w, "%s: %s\n", r.label(), n)
		}
	}
	return nil
}

// exemptions are the figures of gated units that are not compared with the
// baseline, and why: every other ratio, count and memory figure is gated;
// every time and CPU figure is information (framework.UnitClass).
var exemptions = []framework.Exemption{
	{Metric: "HTTPRouteModeOverIstioMode", Key: "Converge",
		Why: "it includes the two floors' own ratio, the control plane's; each mode's ratio to its floor is gated (ConvergenceOverFloor)"},
	{Metric: "QuietNamespace", Unit: framework.UnitRatio,
		Why: "one sample; bounded in the run instead (maxLoneShare)"},
	{Metric: "EditLatency", Unit: framework.UnitRatio,
		Why: "the tail of 100 samples on a shared machine; bounded in the run instead (maxEditTail)"},
	{Metric: "NoisyNeighbour", Unit: framework.UnitRatio,
		Why: "the worst of 5 samples against the flood's own work or alone; bounded in the run instead (maxFloodShare)"},
	{Metric: "PeakMemory", Key: "Heap", Labels: map[string]string{"Controller": string(contract.RateLimit.Name)},
		Why: "sampled every 2 s in a phase of 5-12 s: 59-73 MiB over the last seven 1k runs here; its RSS (VmHWM, exact) is gated"},
	{Metric: "Reconciles", Labels: map[string]string{"Controller": string(contract.RateLimit.Name)},
		Why: "the world's key and one per namespace: how many reconciles it takes is how its events batched in time"},
}

// floorFigure is the machine's floor: (0)'s convergence, Istio mode.
func (res results) floorFigure() *framework.Machine {
	f := res.find(floorController, modeIstio)
	if f == nil {
		return nil
	}
	labels := map[string]string{"Metric": "Convergence", "Controller": f.controller, "Objects": f.objects}
	return &framework.Machine{Floor: framework.ItemName(labels) + " Converge", FloorMilliseconds: framework.Milliseconds(f.converge)}
}

// PerfData is per controller its times, memory, reconciles, API requests
// and CPU, labelled with what it converged, and the machine's floor.
func (res results) PerfData() framework.PerfData {
	d := framework.PerfData{Machine: res.floorFigure(), DataItems: res.floorPerfData()}
	for _, r := range res {
		if r.controller == floorController {
			continue
		}
		labels := func(metric string) map[string]string {
			return map[string]string{"Metric": metric, "Controller": r.controller, "Objects": r.objects}
		}
		d.DataItems = append(d.DataItems, r.requestItems(labels("APIRequests"))...)
		d.DataItems = append(d.DataItems,
			framework.DataItem{Labels: labels("Convergence"), Unit: framework.UnitMilliseconds, Data: map[string]float64{
				"Create": framework.Milliseconds(r.create), "Converge": framework.Milliseconds(r.converge)}},
			framework.DataItem{Labels: labels("PeakMemory"), Unit: framework.UnitMiB, Data: map[string]float64{
				"RSS": framework.MiB(r.peakRSS), "Heap": framework.MiB(r.peakHeap)}},
			framework.DataItem{Labels: labels("Reconciles"), Unit: framework.UnitCount, Data: map[string]float64{
				"AtConvergence": r.reconcilesAtConvergence, "Idle": r.reconciles}},
			framework.DataItem{Labels: labels("CPUUntilConverged"), Unit: framework.UnitSeconds, Data: r.cpu.Seconds},
		)
		d.DataItems = append(d.DataItems, r.scale.dataItems(labels)...)
		if f := r.fairness; f != nil {
			d.DataItems = append(d.DataItems, framework.DataItem{Labels: labels("NoisyNeighbour"), Unit: framework.UnitMilliseconds, Data: map[string]float64{
				"AloneMax": framework.Milliseconds(slices.Max(f.alone)), "FloodedMedian": framework.Milliseconds(median(f.flooded)),
				"FloodedMax": framework.Milliseconds(slices.Max(f.flooded)),
			}})
			if ratios := f.ratios(); len(ratios) > 0 {
				d.DataItems = append(d.DataItems, framework.DataItem{Labels: labels("NoisyNeighbour"), Unit: framework.UnitRatio, Data: ratios})
			}
		}
	}
	istio, route := res.find(string(contract.APIRule.Name), modeIstio), res.find(string(contract.APIRule.Name), modeHTTPRoute)
	if istio != nil && route != nil {
		r := ratioOf(istio, route)
		d.DataItems = append(d.DataItems, framework.DataItem{
			Labels: map[string]string{"Metric": "HTTPRouteModeOverIstioMode", "Controller": istio.controller, "Objects": istio.objects},
			Unit:   framework.UnitRatio, Data: map[string]float64{"Converge": r.converge, "RequestsPerObject": r.requestsPerObject},
		})
	}
	return d
}
