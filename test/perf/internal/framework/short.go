package framework

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ShortEnv turns the short mode of the benchmarks of test/perf on (make
// bench-short): they bring up kwok clusters of their own, so a plain
// `go test ./...` skips them.
const ShortEnv = "PORTICO_PERF_SHORT"

// StartShort skips t unless ShortEnv is set and returns the context the
// short benchmark runs in, cancelled after timeout.
func StartShort(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if os.Getenv(ShortEnv) == "" {
		t.Skip("set " + ShortEnv + "=1 (make bench-short) to run the short benchmark on a kwok cluster")
	}
	// The benchmark's informers log through controller-runtime; what
	// matters is returned as an error instead.
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}
