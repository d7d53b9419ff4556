package main

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// scaleFigures are the figures of issue 29 measured around (1): the quiet
// namespace (1q), the restart (1r), the edits (1e), and the run's 429s.
// They are on the Istio-mode APIRule result.
type scaleFigures struct {
	// lone and converge are (1q)'s time to Ready and (1)'s convergence.
	lone, converge time.Duration
	restart        *restartFigures
	edits          editFigures
	throttled      *throttling
}

// steadyState runs, after (1) converged, (1q)'s wait, (1r) and (1e) on the
// apirule controller p and returns the restarted process (nil when none
// started). gate gets the failed bounds: they end the run only once every
// phase has run; err is a broken run.
func (b *bench) steadyState(ctx context.Context, p *controller, r *result, lone *loneTenant,
	throttled, startup map[string]float64, gate func(error)) (*controller, error) {
	if r.scale == nil {
		r.scale = &scaleFigures{}
	}
	addNote := func(note string, err error) {
		if note != "" {
			framework.Logf("%s", note)
			r.notes = append(r.notes, note)
		}
		gate(err)
	}
	var err error
	if r.scale.lone, err = lone.wait(ctx, b); err != nil {
		return nil, err
	}
	r.scale.converge = r.converge
	addNote(loneNote(r.scale.lone, r.converge, lone.after, len(b.plan.apiRules) >= gatedScale))
	// Every APIRule there is: (1)'s and the quiet namespace's.
	next, restart, err := b.restartAPIRules(ctx, p, len(b.plan.apiRules)+1, throttled, startup)
	if err != nil {
		return next, err
	}
	r.scale.restart = &restart
	addNote(restart.note())
	if r.scale.edits, err = b.measureEdits(ctx, next); err != nil {
		return next, err
	}
	addNote(r.scale.edits.note(b.opts.edits >= gatedEdits))
	return next, nil
}

// addThrottling reads the 429s of the running controllers (added to those
// of processes that ended, in throttled and, until ready, startup) and kube-apiserver's rejections
// since rejected0, and notes them on the Istio-mode APIRule result.
func (b *bench) addThrottling(ctx context.Context, res results, running map[string]*controller,
	throttled, startup, rejected0 map[string]float64) error {
	t := throttling{client: maps.Clone(throttled), startup: maps.Clone(startup)}
	for name, p := range running {
		n, err := tooMany(ctx, p)
		if err != nil {
			return err
		}
		t.client[name] += n
		t.startup[name] += p.startup429
	}
	rejected, err := apiServerRejections(ctx, b.conn.Config)
	if err != nil {
		return err
	}
	t.server = since(rejected, rejected0)
	r := res.find(string(contract.APIRule.Name), modeIstio)
	if r == nil {
		return errors.New("no result of the apirule controller for the 429 figures")
	}
	if r.scale == nil {
		r.scale = &scaleFigures{}
	}
	r.scale.throttled = &t
	note, gateErr := t.note()
	framework.Logf("%s", note)
	r.notes = append(r.notes, note)
	return gateErr
}

// dataItems are the figures as PerfData, labelled like the result's.
func (s *scaleFigures) dataItems(labels func(metric string) map[string]string) []framework.DataItem {
	if s == nil {
		return nil
	}
	var items []framework.DataItem
	if s.lone > 0 {
		items = append(items,
			framework.DataItem{Labels: labels("QuietNamespace"), Unit: framework.UnitMilliseconds,
				Data: map[string]float64{"Ready": framework.Milliseconds(s.lone)}},
			framework.DataItem{Labels: labels("QuietNamespace"), Unit: framework.UnitRatio,
				Data: map[string]float64{"ReadyOverConvergence": loneShareOf(s.lone, s.converge)}})
	}
	if f := s.restart; f != nil {
		writes := 0.0
		for _, v := range f.writes() {
			writes += v
		}
		items = append(items,
			framework.DataItem{Labels: labels("Restart"), Unit: framework.UnitMilliseconds, Data: map[string]float64{
				"Ready": framework.Milliseconds(f.ready), "Reconciled": framework.Milliseconds(f.reconciled)}},
			framework.DataItem{Labels: labels("RestartRequests"), Unit: framework.UnitCount, Data: withTotal(f.requests, "Writes", writes)},
		)
	}
	if n := len(s.edits.latencies); n > 0 {
		items = append(items, framework.LatencyItem(labels("EditLatency"), s.edits.latencies),
			framework.DataItem{Labels: labels("EditLatency"), Unit: framework.UnitRatio,
				Data: map[string]float64{"Perc99OverPerc50": s.edits.tail()}},
			framework.DataItem{Labels: labels("EditRequests"), Unit: framework.UnitRatio,
				Data: map[string]float64{"PerEdit": s.edits.requests / float64(n)}})
	}
	if t := s.throttled; t != nil {
		data := withTotal(t.client, "APFRejected", 0)
		data["APIServer429"] = 0
		for k, v := range t.server {
			if strings.HasPrefix(k, "APF ") {
				data["APFRejected"] += v
			} else {
				data["APIServer429"] += v
			}
		}
		items = append(items, framework.DataItem{Labels: labels("TooManyRequests"), Unit: framework.UnitCount, Data: data})
	}
	return items
}

// withTotal is a copy of m with one more entry.
func withTotal(m map[string]float64, name string, v float64) map[string]float64 {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]float64{}
	}
	out[name] = v
	return out
}
