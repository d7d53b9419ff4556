package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/portico-dev/portico/internal/globallimit"
)

func TestHealthHandler(t *testing.T) {
	cases := map[string]struct {
		path  string
		ready error
		code  int
		body  string
	}{
		"healthz while not ready": {"/healthz", errors.New("redis does not answer"), http.StatusOK, "ok"},
		"readyz ready":            {"/readyz", nil, http.StatusOK, "ok"},
		"readyz not ready":        {"/readyz", errors.New("redis does not answer"), http.StatusServiceUnavailable, "not ready: redis does not answer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rec := httptest.NewRecorder()
			HealthHandler(func() error { return tc.ready }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			g.Expect(rec.Code).To(Equal(tc.code))
			g.Expect(rec.Body.String()).To(ContainSubstring(tc.body))
		})
	}
}

func TestDistinctPorts(t *testing.T) {
	cases := map[string]struct {
		addrs   []string
		wantErr string
	}{
		"defaults":                        {[]string{":8081", ":8082", ":8080"}, ""},
		"metrics off":                     {[]string{":8081", ":8082", "0"}, ""},
		"the controllers' health address": {[]string{":8081", ":8081", ":8080"}, "share port 8081"},
		"hosts do not matter":             {[]string{"127.0.0.1:9000", "0.0.0.0:9000"}, "share port 9000"},
		"no port":                         {[]string{"localhost"}, "address \"localhost\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := distinctPorts(tc.addrs...)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRun runs the process against a fake API server and miniredis: ready
// once both watches synced and Redis answers, serving decisions, and not
// ready once Redis is gone.
func TestRun(t *testing.T) {
	g := NewWithT(t)
	const ns = "portico-system"
	key := []byte("key")
	cfg := globallimit.Config{Namespace: "team-a", Limits: []globallimit.Limit{{ID: "api/r", Requests: 1, Unit: globallimit.Hour, Algorithm: globallimit.FixedWindow}}}
	cs := fake.NewClientset(
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: globallimit.ConfigMapName("team-a"), Namespace: ns, Labels: map[string]string{
				globallimit.LabelConfig: "true", globallimit.LabelNamespace: "team-a", globallimit.LabelManagedBy: globallimit.ManagedBy,
			}},
			Data: map[string]string{globallimit.ConfigData: cfg.Marshal()},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: globallimit.KeySecretName, Namespace: ns}, Data: map[string][]byte{globallimit.KeySecretData: key}},
	)
	m := miniredis.RunT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "address"), []byte(m.Addr()), 0o600)).To(Succeed())

	o := Options{
		GRPCAddr: freeAddr(t), HealthAddr: freeAddr(t), MetricsAddr: freeAddr(t),
		Namespace: ns, RedisDir: dir, MaxKeysPerRule: 10, ShutdownTimeout: time.Second,
		Kube: cs, Log: logr.Discard(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	defer func() {
		cancel()
		g.Eventually(done).Should(Receive(BeNil()))
	}()

	readyz := func() (int, error) {
		resp, err := http.Get(fmt.Sprintf("http://%s/readyz", o.HealthAddr))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	g.Eventually(readyz).Should(Equal(http.StatusOK))

	conn, err := grpc.NewClient(o.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	req := &rlsv3.RateLimitRequest{Domain: globallimit.Domain("team-a"), Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: globallimit.TokenKey, Value: globallimit.Token(key, "team-a")}, {Key: globallimit.LimitKey, Value: "api/r"},
	}}}}
	var got []rlsv3.RateLimitResponse_Code
	for range 2 {
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		got = append(got, resp.GetOverallCode())
	}
	g.Expect(got).To(Equal([]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}))

	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", o.MetricsAddr))
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(string(body)).To(ContainSubstring(`portico_ratelimit_service_decisions_total{code="over_limit"}`))
	g.Expect(string(body)).To(ContainSubstring("portico_ratelimit_service_redis_up 1"))

	m.Close()
	g.Eventually(readyz, 10*time.Second).Should(Equal(http.StatusServiceUnavailable))
}
