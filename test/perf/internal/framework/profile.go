package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
)

// CPUProfiles records Go CPU profiles of processes during one window: a
// benchmark starts it when the window opens, and the files are written
// when each profile's time is up.
type CPUProfiles struct {
	// Dir receives <name>.pprof; nothing is recorded when empty.
	Dir string
	// Duration is each profile's length.
	Duration time.Duration

	done chan error
	n    int
}

// Start records, concurrently, the profile of each Go process whose
// /debug/pprof endpoint is in servers (name -> base URL, for example
// http://127.0.0.1:6060), and of kube-apiserver when apiServer is not nil.
func (p *CPUProfiles) Start(ctx context.Context, servers map[string]string, apiServer *rest.Config) {
	if p.Dir == "" {
		return
	}
	p.done = make(chan error, len(servers)+1)
	query := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(p.Duration.Seconds()))
	for name, base := range servers {
		p.n++
		go func() { p.done <- p.fetch(ctx, name, http.DefaultClient, base+query) }()
	}
	if apiServer != nil {
		p.n++
		go func() {
			hc, err := rest.HTTPClientFor(apiServer)
			if err != nil {
				p.done <- err
				return
			}
			p.done <- p.fetch(ctx, "kube-apiserver", hc, apiServer.Host+query)
		}()
	}
}

// Wait waits for every profile and returns where they are.
func (p *CPUProfiles) Wait() error {
	var errs []error
	for range p.n {
		if err := <-p.done; err != nil {
			errs = append(errs, err)
		}
	}
	if p.n > 0 {
		Logf("CPU profiles in %s (go tool pprof -top %s)", p.Dir, filepath.Join(p.Dir, "<name>.pprof"))
	}
	p.n = 0
	return errors.Join(errs...)
}

func (p *CPUProfiles) fetch(ctx context.Context, name string, hc *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, p.Duration+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", name, resp.Status)
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(p.Dir, name+".pprof"))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile %s: %w", name, err)
	}
	return f.Close()
}
