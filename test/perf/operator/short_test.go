package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// shortOptions are the short mode's: two cycles of each, a short steady
// window, on a cluster of its own that goes at the end, no comparison. The
// quiet period before the window stays the full bench's: a shorter one let
// a late write of the last cycle (client-go retries an Event after 10 s
// and jitter) land in the window.
func shortOptions() options {
	o := defaultOptions()
	o.Cluster, o.Down = "portico-perf-short-op", true
	o.Output, o.Baseline = "bin/perf/operator-short.json", ""
	o.cycles, o.steady = 2, 3*time.Second
	return o
}

// TestShort runs the whole bench with two cycles (make bench-short): the
// operator must react in every cycle (a Deployment gone with its CRD, back
// with it, recreated after a delete) and write nothing in steady state. It
// asserts no timing.
func TestShort(t *testing.T) {
	ctx := framework.StartShort(t, 5*time.Minute)
	o := shortOptions()
	var out bytes.Buffer
	r, err := run(ctx, o, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range r.latencies() {
		if len(l.samples) != o.cycles {
			t.Errorf("%s: %d samples, want %d", l.name, len(l.samples), o.cycles)
		}
	}
	if total := r.writes.total(); total != 0 {
		t.Errorf("the operator wrote %g times in %s of steady state: %v", total, o.steady, r.writes)
	}
}
