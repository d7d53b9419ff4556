package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	testTimeout = 100 * time.Millisecond
	// streamFor outlasts testTimeout several times over.
	streamFor = 5 * testTimeout
)

// apiServer answers like a stalled API server: a watch streams an event
// every few milliseconds for streamFor and ends; a request whose path ends
// in "/stalled-body" sends its headers and then nothing; "/fast" answers
// at once; everything else never answers.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isWatch(r):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			for end := time.Now().Add(streamFor); time.Now().Before(end); {
				fmt.Fprintf(w, `{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"at-%d"}}}`+"\n", time.Now().UnixNano())
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(testTimeout / 5):
				}
			}
		case strings.HasSuffix(r.URL.Path, "/fast"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fast"}}`)
		case strings.HasSuffix(r.URL.Path, "/stalled-body"):
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, `{"apiVersion":`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDeadlineCutsRequestsButNotWatches(t *testing.T) {
	srv := apiServer(t)
	client := &http.Client{Transport: &deadlineTransport{next: http.DefaultTransport, timeout: testTimeout}}
	for name, tc := range map[string]struct {
		path    string
		cut     bool
		atLeast time.Duration // how long reading the whole response takes at least
	}{
		"a GET the server never answers is cut":             {path: "/api/v1/namespaces/a/configmaps/hangs", cut: true},
		"a LIST the server never answers is cut":            {path: "/api/v1/configmaps?limit=500", cut: true},
		"a body that stalls after the headers is cut":       {path: "/api/v1/namespaces/a/configmaps/stalled-body", cut: true},
		"watch=false is not a watch":                        {path: "/api/v1/configmaps?watch=false", cut: true},
		"a fast answer is read whole after RoundTrip":       {path: "/api/v1/namespaces/a/configmaps/fast"},
		"a watch streams past the deadline":                 {path: "/api/v1/configmaps?watch=true&resourceVersion=1", atLeast: streamFor},
		"a watch asked for with watch=1 is a watch as well": {path: "/api/v1/configmaps?watch=1", atLeast: streamFor},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			err := func() error {
				resp, err := client.Get(srv.URL + tc.path)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				_, err = io.ReadAll(resp.Body)
				return err
			}()
			took := time.Since(start)
			if tc.cut {
				g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "error: %v", err)
				g.Expect(took).To(BeNumerically("<", 20*testTimeout))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(took).To(BeNumerically(">=", tc.atLeast))
		})
	}
}

// Through client-go, as the controllers' clients use it: a Get the server
// never answers fails after the timeout, a watch delivers events for as
// long as the server sends them.
func TestBoundsThroughClientGo(t *testing.T) {
	g := NewWithT(t)
	srv := apiServer(t)
	cfg := Bounds{QPS: 1000, Burst: 1000, Timeout: testTimeout}.Apply(&rest.Config{Host: srv.URL})
	clients, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()

	start := time.Now()
	_, err = clients.CoreV1().ConfigMaps("a").Get(ctx, "hangs", metav1.GetOptions{})
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "error: %v", err)
	g.Expect(time.Since(start)).To(BeNumerically("<", 20*testTimeout))

	w, err := clients.CoreV1().ConfigMaps("a").Watch(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	start = time.Now()
	var last time.Duration
	for range w.ResultChan() {
		last = time.Since(start)
	}
	g.Expect(last).To(BeNumerically(">", 2*testTimeout), "the watch's last event came when the deadline would have cut it")
}

func TestApply(t *testing.T) {
	base := &rest.Config{Host: "https://api.example", QPS: -1}
	for name, tc := range map[string]struct {
		bounds      Bounds
		qps         float32
		burst       int
		limited     bool
		wrapsClient bool
	}{
		"the defaults":                {bounds: Bounds{QPS: 300, Burst: 600, Timeout: 30 * time.Second}, qps: 300, burst: 600, limited: true, wrapsClient: true},
		"no client-side limit":        {bounds: Bounds{QPS: 0, Burst: 600, Timeout: time.Second}, qps: -1, wrapsClient: true},
		"a negative QPS is no limit":  {bounds: Bounds{QPS: -5, Burst: 600}, qps: -1},
		"no timeout: no deadline set": {bounds: Bounds{QPS: 5, Burst: 10}, qps: 5, burst: 10, limited: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := tc.bounds.Apply(base)
			g.Expect(cfg.QPS).To(Equal(tc.qps))
			g.Expect(cfg.Timeout).To(BeZero(), "rest.Config.Timeout would cut every watch")
			g.Expect(cfg.RateLimiter != nil).To(Equal(tc.limited))
			if tc.limited {
				g.Expect(cfg.Burst).To(Equal(tc.burst))
				g.Expect(cfg.RateLimiter.QPS()).To(Equal(tc.qps))
				g.Expect(rest.CopyConfig(cfg).RateLimiter).To(BeIdenticalTo(cfg.RateLimiter), "copies share the bucket")
			}
			g.Expect(cfg.WrapTransport != nil).To(Equal(tc.wrapsClient))
			if tc.wrapsClient {
				_, ok := cfg.WrapTransport(http.DefaultTransport).(*deadlineTransport)
				g.Expect(ok).To(BeTrue())
			}
			g.Expect(base.RateLimiter).To(BeNil(), "the original (leader election's) is left as it was")
			g.Expect(base.WrapTransport).To(BeNil())
			g.Expect(base.QPS).To(Equal(float32(-1)))
		})
	}
}

// One bucket for the process: requests through two clients of different
// resources wait for the same tokens (a bucket per client would let each
// go at the full rate).
func TestOneBucketForEveryClient(t *testing.T) {
	g := NewWithT(t)
	srv := apiServer(t)
	const qps, requests = 20, 10
	cfg := Bounds{QPS: qps, Burst: 1, Timeout: time.Second}.Apply(&rest.Config{Host: srv.URL})
	clients, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	start := time.Now()
	for i := range requests {
		if i%2 == 0 {
			_, err = clients.CoreV1().ConfigMaps("a").Get(ctx, "fast", metav1.GetOptions{})
		} else {
			_, err = clients.AppsV1().Deployments("a").Get(ctx, "fast", metav1.GetOptions{})
		}
		g.Expect(err).NotTo(HaveOccurred())
	}
	// requests-1 waits of 1/qps each; a bucket per client would take half.
	g.Expect(time.Since(start)).To(BeNumerically(">=", (requests-1)*time.Second/qps*9/10))
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		bounds Bounds
		err    string
	}{
		"the defaults":                {bounds: Bounds{QPS: 300, Burst: 600, Timeout: 30 * time.Second}},
		"no limit needs no burst":     {bounds: Bounds{QPS: 0, Burst: 0}},
		"a limit with no burst":       {bounds: Bounds{QPS: 10, Burst: 0}, err: "--kube-api-burst must be at least 1"},
		"a negative timeout":          {bounds: Bounds{QPS: 10, Burst: 1, Timeout: -time.Second}, err: "--kube-api-timeout must not be negative"},
		"no timeout is allowed (off)": {bounds: Bounds{QPS: 10, Burst: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.bounds.Validate()
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}
