package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/config"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/server"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/service"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/store"
	"github.com/portico-dev/portico/internal/globallimit"
)

type options struct {
	redisServer string
	duration    time.Duration
	clients     int
	conns       int
	keys        int
	maxKeys     int64
	output      string
	// Gates: ratios of the same run, and memory.
	maxP99Ratio     float64
	maxBytesPerKey  float64
	maxFloodKeysPct float64
}

func main() {
	var o options
	flag.StringVar(&o.redisServer, "redis-server", "", "redis-server binary (hack/redis.sh)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long each scenario runs")
	flag.IntVar(&o.clients, "clients", 64, "concurrent callers")
	flag.IntVar(&o.conns, "conns", 4, "gRPC connections the callers share (Envoy keeps a few per worker)")
	flag.IntVar(&o.keys, "keys", 10000, "distinct client keys of the per-client-keys scenario and of the memory figure")
	flag.Int64Var(&o.maxKeys, "max-keys-per-rule", store.DefaultMaxKeys, "the service's bound on client keys per limit and window")
	flag.StringVar(&o.output, "output", "", "also write the results table to this file")
	flag.Float64Var(&o.maxP99Ratio, "max-p99-ratio", 10, "gate: a limited scenario's p99 over the baseline's p99 (same run)")
	flag.Float64Var(&o.maxBytesPerKey, "max-bytes-per-key", 512, "gate: Redis used_memory per active client key")
	flag.Float64Var(&o.maxFloodKeysPct, "max-flood-keys-pct", 101, "gate: Redis keys after a flood of 3×max-keys-per-rule distinct client keys, in percent of the bound")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const ns = "bench"

var key = []byte("bench-key")

// The limits: budgets far above what the run sends, so that every decision
// does the same work.
var limits = []globallimit.Limit{
	{ID: "bench/fixed", Requests: 1_000_000_000, Unit: globallimit.Hour, Algorithm: globallimit.FixedWindow},
	{ID: "bench/bucket", Requests: 1_000_000_000, Unit: globallimit.Hour, Algorithm: globallimit.TokenBucket},
	{ID: "bench/clients", Requests: 1_000_000_000, Unit: globallimit.Hour, Algorithm: globallimit.FixedWindow},
	{ID: "bench/flood", Requests: 1_000_000_000, Unit: globallimit.Hour, Algorithm: globallimit.FixedWindow},
}

type feed struct{ tenant *config.Tenant }

func (f feed) Key() []byte { return key }
func (f feed) Tenant(n string) (*config.Tenant, bool) {
	return f.tenant, n == ns
}

type scenario struct {
	name  string
	limit string
	// client returns the client key entry of caller c's i-th call.
	client func(c, i int) string
}

type result struct {
	name      string
	calls     int
	errors    int
	p50, p99  time.Duration
	perSecond float64
}

func run(o options) error {
	if o.redisServer == "" {
		return errors.New("--redis-server is required (make bench-ratelimit-service passes hack/redis.sh's)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, stop, err := startRedis(ctx, o.redisServer)
	if err != nil {
		return err
	}
	defer stop()

	rdb := store.New(o.maxKeys, nil)
	rdb.SetClient(redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 64}))
	if err := rdb.Ping(ctx); err != nil {
		return err
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()

	svc := &service.Service{Configs: feed{config.NewTenant(globallimit.Config{Namespace: ns, Limits: limits})}, Store: rdb}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := server.NewGRPCServer(svc)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	var clients []rlsv3.RateLimitServiceClient
	for range o.conns {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		clients = append(clients, rlsv3.NewRateLimitServiceClient(conn))
	}

	perCaller := func(c, _ int) string { return "caller-" + strconv.Itoa(c) }
	scenarios := []scenario{
		{"baseline (no Redis)", "bench/unknown", perCaller},
		{"fixed-window", "bench/fixed", perCaller},
		{"token-bucket", "bench/bucket", perCaller},
		{fmt.Sprintf("per-client-keys (%d)", o.keys), "bench/clients", func(c, i int) string { return "client-" + strconv.Itoa((c*7919+i)%o.keys) }},
	}
	var results []result
	for _, s := range scenarios {
		fmt.Fprintf(os.Stderr, "bench: %s for %s with %d callers\n", s.name, o.duration, o.clients)
		results = append(results, measure(ctx, clients, s, o))
	}

	bytesPerKey, sampleBytes, err := memoryPerKeys(ctx, admin, clients[0], o.keys)
	if err != nil {
		return err
	}
	floodKeys, err := flood(ctx, admin, clients, int(3*o.maxKeys))
	if err != nil {
		return err
	}

	text, failures := report(o, results, bytesPerKey, sampleBytes, floodKeys)
	fmt.Print(text)
	if o.output != "" {
		if err := os.MkdirAll(filepath.Dir(o.output), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.output, []byte(text), 0o644); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return errors.New("gates failed")
	}
	return nil
}

// report is the results table and the gates' failures.
func report(o options, results []result, bytesPerKey float64, sampleBytes int64, floodKeys int) (string, []string) {
	var out strings.Builder
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tcalls\terrors\tdecisions/s\tp50\tp99\tp99/baseline")
	base := results[0]
	var failures []string
	for _, r := range results {
		ratio := float64(r.p99) / float64(max(base.p99, 1))
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%.2f\n", r.name, r.calls, r.errors, r.perSecond, fmtDur(r.p50), fmtDur(r.p99), ratio)
		if r.errors > 0 {
			failures = append(failures, fmt.Sprintf("%s: %d calls failed", r.name, r.errors))
		}
		if ratio > o.maxP99Ratio {
			failures = append(failures, fmt.Sprintf("%s: p99 %.2f× the baseline's, above %.2f×", r.name, ratio, o.maxP99Ratio))
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(&out, "\nredis used_memory per client key (fixed window, %d keys): %.0f bytes (%.2f MiB per 10,000 keys); MEMORY USAGE of one key: %d bytes\n", o.keys, bytesPerKey, bytesPerKey*10000/(1<<20), sampleBytes)
	floodPct := 100 * float64(floodKeys) / float64(o.maxKeys)
	fmt.Fprintf(&out, "redis keys after %d distinct client keys on one limit (--max-keys-per-rule %d): %d (%.1f%% of the bound)\n", 3*o.maxKeys, o.maxKeys, floodKeys, floodPct)
	fmt.Fprintf(&out, "callers %d over %d gRPC connections, %s per scenario, GOMAXPROCS %d\n", o.clients, o.conns, o.duration, runtimeProcs())
	if bytesPerKey > o.maxBytesPerKey {
		failures = append(failures, fmt.Sprintf("%.0f bytes per key, above %.0f", bytesPerKey, o.maxBytesPerKey))
	}
	if floodPct > o.maxFloodKeysPct {
		failures = append(failures, fmt.Sprintf("%d keys after the flood, above %.0f%% of %d", floodKeys, o.maxFloodKeysPct, o.maxKeys))
	}
	if len(failures) == 0 {
		fmt.Fprintln(&out, "gates: passed")
	} else {
		fmt.Fprintln(&out, "gates: FAILED\n  "+strings.Join(failures, "\n  "))
	}
	return out.String(), failures
}

// measure runs one scenario with o.clients callers for o.duration.
func measure(ctx context.Context, clients []rlsv3.RateLimitServiceClient, s scenario, o options) result {
	var mu sync.Mutex
	var all []time.Duration
	errs := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(o.duration)
	for c := range o.clients {
		wg.Go(func() {
			client := clients[c%len(clients)]
			var lat []time.Duration
			failed := map[string]int{}
			for i := 0; ctx.Err() == nil; i++ {
				req := request(s.limit, s.client(c, i))
				t := time.Now()
				if t.After(end) {
					break
				}
				_, err := client.ShouldRateLimit(ctx, req)
				lat = append(lat, time.Since(t))
				if err != nil {
					failed[err.Error()]++
				}
			}
			mu.Lock()
			all = append(all, lat...)
			for e, n := range failed {
				errs[e] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(all)
	r := result{
		name: s.name, calls: len(all),
		p50: percentile(all, 0.50), p99: percentile(all, 0.99),
		perSecond: float64(len(all)) / elapsed.Seconds(),
	}
	for e, n := range errs {
		fmt.Fprintf(os.Stderr, "bench: %s: %d calls failed: %s\n", s.name, n, e)
		r.errors += n
	}
	return r
}

func request(limit, client string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: globallimit.Domain(ns), Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
			{Key: globallimit.TokenKey, Value: globallimit.Token(key, ns)},
			{Key: globallimit.LimitKey, Value: limit},
			{Key: globallimit.HeaderKeyPrefix + "x-api-key", Value: client},
		},
	}}}
}

// memoryPerKeys is used_memory's growth per client key when n client keys
// each make one decision of a fixed window: measured with the keys, then
// after FLUSHALL, so that both figures see the same connections and
// buffers. It also returns MEMORY USAGE of one client key.
func memoryPerKeys(ctx context.Context, admin *redis.Client, client rlsv3.RateLimitServiceClient, n int) (perKey float64, sample int64, err error) {
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return 0, 0, err
	}
	for i := range n {
		if _, err := client.ShouldRateLimit(ctx, request("bench/fixed", fmt.Sprintf("memory-%d-%d", i, rand.Int()))); err != nil {
			return 0, 0, err
		}
	}
	with, err := usedMemory(ctx, admin)
	if err != nil {
		return 0, 0, err
	}
	keys, err := admin.Keys(ctx, "portico:{"+ns+"}:bench/fixed:fw:c:*").Result()
	if err != nil || len(keys) == 0 {
		return 0, 0, fmt.Errorf("find a client key: %v (%d keys)", err, len(keys))
	}
	if sample, err = admin.MemoryUsage(ctx, keys[0]).Result(); err != nil {
		return 0, 0, err
	}
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return 0, 0, err
	}
	without, err := usedMemory(ctx, admin)
	if err != nil {
		return 0, 0, err
	}
	return float64(with-without) / float64(n), sample, nil
}

// flood sends n distinct client keys to one limit and returns the number
// of Redis keys of that limit afterwards.
func flood(ctx context.Context, admin *redis.Client, clients []rlsv3.RateLimitServiceClient, n int) (int, error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for c, client := range clients {
		wg.Go(func() {
			for i := c; i < n; i += len(clients) {
				if _, err := client.ShouldRateLimit(ctx, request("bench/flood", "flood-"+strconv.Itoa(i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	var count int
	iter := admin.Scan(ctx, 0, "portico:{"+ns+"}:bench/flood:*", 1000).Iterator()
	for iter.Next(ctx) {
		count++
	}
	return count, iter.Err()
}

func usedMemory(ctx context.Context, admin *redis.Client) (int64, error) {
	info, err := admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory has no used_memory")
}

// startRedis runs redis-server on a free port without persistence.
func startRedis(ctx context.Context, bin string) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "portico-bench-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c.Ping(ctx).Err() == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer within 10s", addr)
		}
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}
