package main

import (
	"errors"
	"fmt"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// maxOverFloor is the most an APIRule phase's convergence time may be over
// its floor's (issue 29): the controller's own share of the work on top of
// what the control plane needs for the same writes.
func maxOverFloor(apiRules int) float64 {
	if apiRules <= 1000 {
		return 1.3
	}
	return 1.5
}

// overFloor is an APIRule phase's figures over its floor's, of one run.
type overFloor struct {
	converge, requestsPerObject float64
}

func overFloorOf(phase, floor *result) overFloor {
	return overFloor{
		converge:          phase.converge.Seconds() / max(floor.converge.Seconds(), 1e-9),
		requestsPerObject: phase.requestsPerObject() / max(floor.requestsPerObject(), 1e-9),
	}
}

// withFloors calls f for every APIRule phase that has a floor of its mode.
func (res results) withFloors(f func(phase, floor *result)) {
	for i := range res {
		if res[i].controller != string(contract.APIRule.Name) {
			continue
		}
		if floor := res.find(floorController, res[i].mode); floor != nil {
			f(&res[i], floor)
		}
	}
}

// noteFloors notes every APIRule phase's convergence time and API requests
// beside its floor's.
func (res results) noteFloors() {
	res.withFloors(func(phase, floor *result) {
		r := overFloorOf(phase, floor)
		phase.notes = append(phase.notes, fmt.Sprintf(
			"over the control plane's floor (same run, %s mode): convergence %.2f× (%.2fs / %.2fs; target ≤ %.1f×), API requests per APIRule %.2f× (%.2f / %.2f)",
			phase.mode, r.converge, phase.converge.Seconds(), floor.converge.Seconds(), maxOverFloor(phase.count),
			r.requestsPerObject, phase.requestsPerObject(), floor.requestsPerObject()))
	})
}

// checkFloors fails when an APIRule phase of at least gatedAPIRules took
// longer than maxOverFloor times its floor (the short mode's few converge
// too fast for a ratio to mean anything).
func (res results) checkFloors() error {
	var errs []error
	res.withFloors(func(phase, floor *result) {
		r, limit := overFloorOf(phase, floor), maxOverFloor(phase.count)
		if phase.count >= gatedAPIRules && r.converge > limit {
			errs = append(errs, fmt.Errorf("%s converged %d APIRules in %.2f× the control plane's floor (%.2fs / %.2fs), more than %.1f×",
				phase.label(), phase.count, r.converge, phase.converge.Seconds(), floor.converge.Seconds(), limit))
		}
	})
	return errors.Join(errs...)
}

// floorPerfData is the floors' items (time, requests, CPU) and every
// APIRule phase's ratios to its floor (Metric=ConvergenceOverFloor).
func (res results) floorPerfData() []framework.DataItem {
	var items []framework.DataItem
	for _, r := range res {
		if r.controller != floorController {
			continue
		}
		labels := func(metric string) map[string]string {
			return map[string]string{"Metric": metric, "Controller": r.controller, "Objects": r.objects}
		}
		items = append(items, framework.DataItem{Labels: labels("Convergence"), Unit: framework.UnitMilliseconds, Data: map[string]float64{
			"Create": framework.Milliseconds(r.create), "Converge": framework.Milliseconds(r.converge)}})
		items = append(items, r.requestItems(labels("APIRequests"))...)
		items = append(items, framework.DataItem{Labels: labels("CPUUntilConverged"), Unit: framework.UnitSeconds, Data: r.cpu.Seconds})
	}
	res.withFloors(func(phase, floor *result) {
		r := overFloorOf(phase, floor)
		items = append(items, framework.DataItem{
			Labels: map[string]string{"Metric": "ConvergenceOverFloor", "Controller": phase.controller, "Objects": phase.objects},
			Unit:   framework.UnitRatio, Data: map[string]float64{"Converge": r.converge, "RequestsPerObject": r.requestsPerObject},
		})
	})
	return items
}
