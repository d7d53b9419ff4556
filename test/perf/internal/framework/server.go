package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

// ServerConfig describes a Portico binary (the operator or a controller) to
// run as a host process.
type ServerConfig struct {
	// Name names the process in messages and its log file.
	Name   string
	Binary string
	// Args are passed after the metrics and health address flags, which
	// StartServer sets to free loopback addresses.
	Args []string
	// Env is added to the environment of this process.
	Env []string
	// LogDir receives the log file (the system's temporary directory when
	// empty).
	LogDir string
	// Pprof serves Go's profiles on a free loopback address (PprofURL).
	Pprof bool
}

// Server is a running Portico binary with its metrics and health probes on
// loopback addresses.
type Server struct {
	*framework.Process
	Name       string
	LogPath    string
	MetricsURL string
	ReadyURL   string
	// PprofURL is the base of /debug/pprof when ServerConfig.Pprof is set.
	PprofURL string
}

// StartServer starts the binary with its output in a new log file.
func StartServer(c ServerConfig) (*Server, error) {
	metrics, probe, err := framework.ServingAddrs()
	if err != nil {
		return nil, err
	}
	log, err := os.CreateTemp(c.LogDir, "portico-"+c.Name+"-*.log")
	if err != nil {
		return nil, err
	}
	_ = log.Close()
	args := append([]string{
		contract.Flag(contract.FlagMetricsAddress, metrics),
		contract.Flag(contract.FlagHealthAddress, probe),
	}, c.Args...)
	pprofURL := ""
	if c.Pprof {
		addr, err := testenv.FreeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		args, pprofURL = append(args, contract.Flag(contract.FlagPprofAddress, addr)), "http://"+addr
	}
	p, err := framework.StartProcess(c.Binary, args, c.Env, log.Name())
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Binary, err)
	}
	return &Server{
		Process: p, Name: c.Name, LogPath: log.Name(),
		MetricsURL: "http://" + metrics + "/metrics",
		ReadyURL:   "http://" + probe + contract.ReadyzPath,
		PprofURL:   pprofURL,
	}, nil
}

// exitError describes the server's exit, or returns nil while it runs.
func (s *Server) exitError() error {
	if !s.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited: %v (log: %s)", s.Name, s.Err(), s.LogPath)
}

// Stop shuts the server down (SIGTERM) and returns an error unless it
// exited cleanly.
func (s *Server) Stop() error {
	if err := s.Terminate(); err != nil {
		return fmt.Errorf("%s: %w (log: %s)", s.Name, err, s.LogPath)
	}
	return nil
}

// WaitReady polls the server's /readyz until it answers 200.
func (s *Server) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.exitError(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.ReadyURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready: %w (log: %s)", s.Name, err, s.LogPath)
	}
	return nil
}

// Scrape reads the server's Prometheus metrics.
func (s *Server) Scrape(ctx context.Context) (Metrics, error) {
	m, err := ScrapeMetrics(ctx, s.MetricsURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return m, nil
}

// Usage reads the server's CPU time and memory from /proc.
func (s *Server) Usage() (Usage, error) {
	u, err := ProcessUsage(s.Pid())
	if err != nil {
		return Usage{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	return u, nil
}

// WaitSteady scrapes the server's metrics until value has not changed for
// quiet, and returns the last scrape: what a benchmark reads once the
// server is idle.
func (s *Server) WaitSteady(ctx context.Context, quiet, timeout time.Duration, value func(Metrics) float64) (Metrics, error) {
	var last Metrics
	var since time.Time
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout+quiet, true, func(ctx context.Context) (bool, error) {
		if err := s.exitError(); err != nil {
			return false, err
		}
		now, err := s.Scrape(ctx)
		if err != nil {
			return false, err
		}
		if last == nil || value(now) != value(last) {
			since = time.Now()
		}
		last = now
		return time.Since(since) >= quiet, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s did not stand still for %s: %w (log: %s)", s.Name, quiet, err, s.LogPath)
	}
	return last, nil
}

// PeakSampler keeps the largest value of a metric sampled while it runs.
type PeakSampler struct {
	mu   sync.Mutex
	peak float64
	stop context.CancelFunc
	done chan struct{}
}

// SamplePeak samples value from the server's metrics every interval until
// Stop; samples the server does not answer are skipped.
func (s *Server) SamplePeak(every time.Duration, value func(Metrics) float64) *PeakSampler {
	ctx, cancel := context.WithCancel(context.Background())
	p := &PeakSampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_ = wait.PollUntilContextCancel(ctx, every, false, func(ctx context.Context) (bool, error) {
			scrapeCtx, cancel := context.WithTimeout(ctx, 4*every)
			defer cancel()
			if m, err := s.Scrape(scrapeCtx); err == nil {
				p.mu.Lock()
				p.peak = max(p.peak, value(m))
				p.mu.Unlock()
			}
			return s.Exited(), nil
		})
	}()
	return p
}

// Peak is the largest value sampled so far.
func (p *PeakSampler) Peak() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// Stop ends the sampling.
func (p *PeakSampler) Stop() {
	p.stop()
	<-p.done
}
