package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"k8s.io/client-go/kubernetes"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/config"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/metrics"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/service"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/store"
)

// PingInterval is how often Redis is pinged.
const PingInterval = 2 * time.Second

// Options configure the process.
type Options struct {
	// GRPCAddr, HealthAddr and MetricsAddr are listen addresses; a
	// MetricsAddr of "0" or "" serves no metrics.
	GRPCAddr, HealthAddr, MetricsAddr string
	// Namespace is Portico's: where the feed and the key Secret are.
	Namespace string
	// RedisDir holds the Redis connection files; RedisTLS connects with
	// TLS.
	RedisDir string
	RedisTLS bool
	// MaxKeysPerRule bounds the distinct client keys of a limit per window.
	MaxKeysPerRule int64
	// ShutdownTimeout bounds the graceful stop of the gRPC server.
	ShutdownTimeout time.Duration
	// Kube is the API client of the watches.
	Kube kubernetes.Interface
	Log  logr.Logger
}

// Run serves until ctx ends.
func Run(ctx context.Context, o Options) error {
	if err := distinctPorts(o.GRPCAddr, o.HealthAddr, o.MetricsAddr); err != nil {
		return err
	}
	log := o.Log
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	feed := config.NewFeed(log.WithName("config"))
	synced, err := config.Watch(ctx, o.Kube, o.Namespace, feed)
	if err != nil {
		return err
	}
	redisLog := log.WithName("redis")
	rdb := store.New(o.MaxKeysPerRule, func(up bool) {
		metrics.RedisUp(up)
		redisLog.Info("redis reachability changed", "up", up)
	})
	if err := store.WatchConnection(ctx, redisLog, rdb, o.RedisDir, o.RedisTLS, PingInterval); err != nil {
		// Not fatal: the directory is read again every PingInterval, and
		// the replica is not ready meanwhile.
		redisLog.Error(err, "no usable redis connection yet", "dir", o.RedisDir)
	}
	go rdb.Run(ctx, PingInterval, nil)

	grpcServer := NewGRPCServer(&service.Service{Configs: feed, Store: rdb})
	grpcListener, err := net.Listen("tcp", o.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen for gRPC on %s: %w", o.GRPCAddr, err)
	}
	stopping := make(chan struct{})
	servers := httpServers(o, readiness(stopping, synced, rdb.Up))
	errs := make(chan error, len(servers)+1)
	for _, s := range servers {
		go func() {
			if err := s.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve %s: %w", s.Addr, err)
			}
		}()
	}
	go func() {
		if err := grpcServer.Serve(grpcListener); err != nil {
			errs <- fmt.Errorf("serve gRPC on %s: %w", o.GRPCAddr, err)
		}
	}()
	log.Info("serving", "grpc", o.GRPCAddr, "health", o.HealthAddr, "metrics", o.MetricsAddr, "namespace", o.Namespace, "maxKeysPerRule", rdb.MaxKeys)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	close(stopping)
	stopGRPC(grpcServer, o.ShutdownTimeout)
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	return runErr
}

// readiness is /readyz's check: the watches synced, Redis up, not
// stopping.
func readiness(stopping <-chan struct{}, synced, redisUp func() bool) func() error {
	return func() error {
		select {
		case <-stopping:
			return errors.New("stopping")
		default:
		}
		if !synced() {
			return errors.New("the ConfigMap and Secret watches have not synced")
		}
		if !redisUp() {
			return errors.New("redis does not answer")
		}
		return nil
	}
}

// httpServers are the probes' server and, unless disabled, the metrics'.
func httpServers(o Options, ready func() error) []*http.Server {
	servers := []*http.Server{{Addr: o.HealthAddr, Handler: HealthHandler(ready), ReadHeaderTimeout: 5 * time.Second}}
	if o.MetricsAddr != "" && o.MetricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Addr: o.MetricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	return servers
}

// NewGRPCServer serves the RateLimitService v3 API with svc.
func NewGRPCServer(svc rlsv3.RateLimitServiceServer) *grpc.Server {
	s := grpc.NewServer(
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(1<<20),
	)
	rlsv3.RegisterRateLimitServiceServer(s, svc)
	return s
}

// stopGRPC lets calls in flight finish for up to timeout.
func stopGRPC(s *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		s.Stop()
	}
}

// HealthHandler serves /healthz (always OK) and /readyz (ready's error, if
// any, with 503).
func HealthHandler(ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// distinctPorts refuses two servers on one port: the operator's default
// health port for controllers (contract.HealthPort) is this service's
// gRPC port.
func distinctPorts(addrs ...string) error {
	seen := map[string]string{}
	for _, a := range addrs {
		if a == "" || a == "0" {
			continue
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("address %q: %w", a, err)
		}
		if prev, ok := seen[port]; ok {
			return fmt.Errorf("addresses %q and %q share port %s", prev, a, port)
		}
		seen[port] = a
	}
	return nil
}
