package runner

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/testenv"
)

var (
	testCfg   *rest.Config
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		AddToScheme: []func(*runtime.Scheme) error{porticov1alpha1.AddToScheme},
		Setup: func(_ context.Context, env *testenv.Env) error {
			testCfg, k8sClient = env.Config, env.Client
			return nil
		},
	}))
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// processLogs receives the logs of every Run in the test process: the
// controller-runtime logger is set only once per process, by the first Run.
var processLogs = &syncBuffer{}

// logView is what processLogs received since the view was made.
type logView struct{ start int }

func newLogView() *logView { return &logView{start: len(processLogs.String())} }

func (v *logView) String() string { return processLogs.String()[v.start:] }

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

var rateLimitCRD = contract.RateLimits.Name

func TestWatchdogFollowsTheRequiredCRD(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	crds, err := testenv.ReadCRDs(testenv.ProjectCRDPaths()[0] + "/gateway.portico.dev_ratelimits.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	source := crds[0]
	deleteCRD := func() {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: rateLimitCRD}}
		g.Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, crd))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: rateLimitCRD}, &apiextensionsv1.CustomResourceDefinition{}))
		}, 30*time.Second).Should(BeTrue())
	}
	deleteCRD() // the controller starts with its CRD absent

	var reconciled atomic.Int64
	controller := Controller{
		Contract:    contract.Controller{Name: "watchdogtest", Required: []contract.CRD{contract.RateLimits}},
		AddToScheme: []func(*runtime.Scheme) error{porticov1alpha1.AddToScheme},
		Setup: func(mgr ctrl.Manager, _ Environment) error {
			return ctrl.NewControllerManagedBy(mgr).Named("watchdogtest").For(&porticov1alpha1.RateLimit{}).
				Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					reconciled.Add(1)
					return reconcile.Result{}, nil
				}))
		},
	}
	probe := freeAddr(t)
	logs := newLogView()
	exited := make(chan error, 1)
	go func() {
		exited <- Run(ctx, controller, Options{
			MetricsAddr: "0", ProbeAddr: probe, LogLevel: "info", ShutdownTimeout: 5 * time.Second,
			restConfig: testCfg, logOutput: processLogs,
		})
	}()
	readyz := func() int {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	healthz := func() int {
		resp, err := http.Get("http://" + probe + "/healthz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// Missing CRD: alive, not ready, no crash.
	g.Eventually(healthz, 20*time.Second).Should(Equal(http.StatusOK))
	g.Consistently(readyz, 2*time.Second).Should(Equal(http.StatusInternalServerError))
	g.Expect(exited).NotTo(Receive())
	g.Expect(logs.String()).To(ContainSubstring(`"missing":["ratelimits.gateway.portico.dev/v1alpha1"]`))

	limit := func(name string) *porticov1alpha1.RateLimit {
		return &porticov1alpha1.RateLimit{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: porticov1alpha1.RateLimitSpec{
				TargetRef: porticov1alpha1.TargetReference{Kind: porticov1alpha1.TargetGateway, Name: "public"},
				Local:     &porticov1alpha1.TokenBucket{MaxTokens: 10, TokensPerFill: 1, FillInterval: metav1.Duration{Duration: time.Second}},
			},
		}
	}
	install := func() {
		g.Expect(k8sClient.Create(ctx, source.DeepCopy())).To(Succeed())
		g.Eventually(func() error { return k8sClient.Create(ctx, limit(fmt.Sprintf("l%d", time.Now().UnixNano()))) }, 30*time.Second).Should(Succeed())
	}

	// CRD installed: ready and reconciling, without a restart.
	install()
	g.Eventually(readyz, 20*time.Second).Should(Equal(http.StatusOK))
	g.Eventually(reconciled.Load, 20*time.Second).Should(BeNumerically(">", 0))

	// CRD deleted: workers stop, not ready, one clear line, no errors.
	deleteCRD()
	g.Eventually(readyz, 20*time.Second).Should(Equal(http.StatusInternalServerError))
	g.Expect(exited).NotTo(Receive())

	// CRD back again: recovers.
	before := reconciled.Load()
	install()
	g.Eventually(readyz, 20*time.Second).Should(Equal(http.StatusOK))
	g.Eventually(reconciled.Load, 20*time.Second).Should(BeNumerically(">", before))

	cancel()
	g.Eventually(exited, 20*time.Second).Should(Receive(BeNil()))
	out := logs.String()
	g.Expect(strings.Count(out, "Waiting for required CRDs")).To(Equal(2), out)
	g.Expect(strings.Count(out, "workers started")).To(Equal(2), out)
	g.Expect(out).NotTo(ContainSubstring(`"level":"error"`), out)
}
