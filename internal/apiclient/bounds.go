package apiclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/portico-dev/portico/internal/contract"
)

// Bounds are the limits a process puts on its API requests.
type Bounds struct {
	// QPS is the sustained request rate; 0 or less leaves the rate to the
	// API server's priority and fairness.
	QPS float64
	// Burst is how many requests may go at once above QPS.
	Burst int
	// Timeout bounds each request that is not a watch; 0 leaves requests
	// unbounded.
	Timeout time.Duration
}

// Validate reports bounds no client can use, naming their flags.
func (b Bounds) Validate() error {
	switch {
	case b.QPS > 0 && b.Burst < 1:
		return fmt.Errorf("--%s must be at least 1 when --%s is positive, not %d", contract.FlagKubeAPIBurst, contract.FlagKubeAPIQPS, b.Burst)
	case b.Timeout < 0:
		return fmt.Errorf("--%s must not be negative, not %s", contract.FlagKubeAPITimeout, b.Timeout)
	}
	return nil
}

// Apply returns a copy of cfg with the bounds: every client built from it
// (and from its copies) shares one token bucket, and every request but a
// watch ends after Timeout.
func (b Bounds) Apply(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	if b.QPS > 0 {
		out.QPS, out.Burst = float32(b.QPS), b.Burst
		out.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(out.QPS, out.Burst)
	} else {
		out.QPS, out.RateLimiter = -1, nil // unlimited: rest.Config reads 0 as 5 QPS
	}
	if b.Timeout > 0 {
		out.Wrap(func(next http.RoundTripper) http.RoundTripper {
			return &deadlineTransport{next: next, timeout: b.Timeout}
		})
	}
	return out
}

// ReportThrottling registers client-go's rest_client_rate_limiter_duration_seconds
// (time requests waited for the token bucket, by verb and host), which
// controller-runtime leaves off by default, in the metrics the process
// serves. It may be called more than once.
func ReportThrottling() {
	metrics.RegisterRESTClientMetrics(metrics.MetricRateLimiterLatency)
}

// deadlineTransport gives every request but a watch a deadline.
type deadlineTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	// The deadline covers reading the body too: a server that sends the
	// headers and then stalls is cut as well.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// WrappedRoundTripper lets client-go see the transport underneath.
func (t *deadlineTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// isWatch reports whether a request asks for a watch (?watch=true, how
// client-go asks for every watch), which runs until the server ends it.
func isWatch(req *http.Request) bool {
	if req.URL == nil {
		return false
	}
	watch, err := strconv.ParseBool(req.URL.Query().Get("watch"))
	return err == nil && watch
}

// cancelOnClose releases a request's deadline when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
