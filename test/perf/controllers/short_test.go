package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// shortOptions are the short mode's: every phase and verdict with few
// objects, on a cluster of its own that goes at the end, no comparison.
func shortOptions() options {
	o := defaultOptions()
	o.Cluster, o.Down, o.Timeout = "portico-perf-short-ctrl", true, 2*time.Minute
	o.Output, o.Baseline = "bin/perf/controllers-short.json", ""
	o.sizes = sizes{apiRules: 20, rateLimits: 20, gateways: 2, namespaces: 2}
	o.flood = 20
	o.edits = 10
	return o
}

// TestShort runs the whole bench with few objects (make bench-short): both
// controllers must converge to the expected verdicts and objects, the
// APIRules in both modes (in HTTPRoute mode: Ready only with the stand-in
// gateway's answer, their HTTPRoutes checked by the bench's verifyRoutes),
// after the floor phases (the bench's own golden writes) converged in both
// modes. The restarted apirule controller must write nothing, the edits and
// the quiet namespace's APIRule must be applied, and no controller may get
// a 429. It asserts no timing, and no ratio to the floor.
func TestShort(t *testing.T) {
	ctx := framework.StartShort(t, 5*time.Minute)
	var out bytes.Buffer
	results, err := run(ctx, shortOptions(), &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 5 {
		t.Fatalf("%d results, want one per controller and APIRule mode, and a floor per mode", len(results))
	}
	o := shortOptions()
	for _, mode := range []string{modeIstio, modeHTTPRoute} {
		if r := results.find("apirule", mode); r == nil || r.count != o.apiRules {
			t.Errorf("APIRules in %s mode: result %+v, want %d converged", mode, r, o.apiRules)
		}
		// The floor converged by the bench's own writes, as the
		// controller's ServiceAccount: its two or three objects and its
		// status; no patch of the APIRule, whose finalizer the admission
		// policy put on.
		if r := results.find(floorController, mode); r == nil || r.count != o.apiRules || r.requestsPerObject() < 3 || r.requests["PATCH"] != float64(o.apiRules) {
			t.Errorf("floor of %s mode: result %+v, want %d APIRules converged with at least 3 requests each, one PATCH (the status)", mode, r, o.apiRules)
		}
		// Nor does the controller patch the finalizer on: about one PATCH
		// per APIRule, its status (two with the finalizer's; (1q)'s
		// APIRule is counted, not in count).
		if r := results.find("apirule", mode); r != nil && r.requests["PATCH"] >= 1.5*float64(r.count) {
			t.Errorf("APIRules in %s mode: %g PATCH requests for %d APIRules, want one each (the statuses: the API server put the finalizer on)", mode, r.requests["PATCH"], r.count)
		}
	}
	if r := results.find("apirule", modeIstio); r != nil {
		checkScale(t, r.scale, o.edits)
	}
	for _, r := range results {
		if r.controller == floorController {
			continue
		}
		if r.reconciles == 0 || r.requests["POST"]+r.requests["PATCH"] == 0 {
			t.Errorf("%s converged without reconciling or writing: %g reconciles, requests %v", r.controller, r.reconciles, r.requests)
		}
	}
}

// checkScale checks that (1q), (1r), (1e) and the 429 count were measured
// (their bounds on writes and 429s fail the run itself).
func checkScale(t *testing.T, s *scaleFigures, edits int) {
	t.Helper()
	switch {
	case s == nil || s.restart == nil || s.throttled == nil:
		t.Errorf("figures around (1) missing: %+v", s)
	case s.lone <= 0:
		t.Errorf("the quiet namespace's APIRule was not timed: %s", s.lone)
	case len(s.edits.latencies) != edits:
		t.Errorf("%d edits timed, want %d", len(s.edits.latencies), edits)
	case s.restart.reconciles < float64(s.restart.apiRules):
		t.Errorf("the restarted controller reconciled %g times, want at least %d", s.restart.reconciles, s.restart.apiRules)
	}
}
