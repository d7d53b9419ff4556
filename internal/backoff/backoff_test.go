package backoff

import (
	"testing"
	"time"
)

func TestLimiterDelays(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 5 * time.Millisecond},
		{1, 10 * time.Millisecond},
		{2, 20 * time.Millisecond},
		{10, 5120 * time.Millisecond},
		{11, Max}, // 10.24 s: capped
		{12, Max},
		{20, Max}, // 5 ms × 2^20 would be 87 min
		{64, Max}, // past any int64 of nanoseconds
		{1000, Max},
	} {
		l := Limiter[string]()
		for range tc.failures {
			l.When("item")
		}
		if got := l.When("item"); got != tc.want {
			t.Errorf("after %d failures: delay %s, want %s", tc.failures, got, tc.want)
		}
		if got := l.NumRequeues("item"); got != tc.failures+1 {
			t.Errorf("after %d failures: NumRequeues %d, want %d", tc.failures, got, tc.failures+1)
		}
	}
}

func TestLimiterNeverExceedsMax(t *testing.T) {
	l := Limiter[int]()
	var waited time.Duration
	for n := range 200 {
		d := l.When(1)
		if d > Max || d <= 0 {
			t.Fatalf("failure %d: delay %s, want within (0, %s]", n, d, Max)
		}
		waited += d
	}
	// An outage of any length: the next retry is at most Max away.
	if d := l.When(1); d != Max {
		t.Errorf("after 200 failures (%s of retries): delay %s, want %s", waited, d, Max)
	}
}

func TestForgetResets(t *testing.T) {
	l := Limiter[string]()
	for range 30 {
		l.When("a")
		l.When("b")
	}
	l.Forget("a")
	if got := l.NumRequeues("a"); got != 0 {
		t.Errorf("NumRequeues after Forget: %d, want 0", got)
	}
	if got := l.When("a"); got != Base {
		t.Errorf("delay after Forget: %s, want %s", got, Base)
	}
	if got := l.When("b"); got != Max {
		t.Errorf("another item's delay after Forget: %s, want %s (unchanged)", got, Max)
	}
}

// TestNoSharedBudget: items do not share a budget, however many fail at
// once (a token bucket across items would delay the 1000th by 90 s).
func TestNoSharedBudget(t *testing.T) {
	l := Limiter[int]()
	for i := range 1000 {
		if d := l.When(i); d != Base {
			t.Fatalf("item %d's first failure: delay %s, want %s", i, d, Base)
		}
	}
}
