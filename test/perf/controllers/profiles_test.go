package main

import "testing"

// TestProfileDirsAreOnePerPhase: each phase whose CPU is profiled
// (--cpuprofile-dir) writes to a folder of its own, so that HTTPRoute
// mode's profiles do not replace Istio mode's.
func TestProfileDirsAreOnePerPhase(t *testing.T) {
	b := &bench{plan: newPlan(shortOptions().sizes)}
	want := map[string]string{
		"Istio mode":     "apirule-istio",
		"HTTPRoute mode": "apirule-httproute",
		"RateLimits":     "ratelimit",
	}
	got := map[string]string{
		"Istio mode":     b.apiRulePhase().profileDir(),
		"HTTPRoute mode": b.routePhase().profileDir(),
		"RateLimits":     b.rateLimitPhase().profileDir(),
	}
	seen := map[string]string{}
	for name, dir := range got {
		if dir != want[name] {
			t.Errorf("%s: profiles in %q, want %q", name, dir, want[name])
		}
		if other, ok := seen[dir]; ok {
			t.Errorf("%s and %s write their profiles to the same folder %q", name, other, dir)
		}
		seen[dir] = name
	}
}
