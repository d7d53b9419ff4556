package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/operator/internal/catalog"
	"github.com/portico-dev/portico/operator/internal/reconciler"
	"github.com/portico-dev/portico/operator/internal/render"
	"github.com/portico-dev/portico/test/testenv"
)

const namespace = "portico-system"

var (
	k8sClient client.Client
	testCfg   *rest.Config
	// operatorWrites counts every mutating request the operator sends,
	// except Events: the recorder sends those asynchronously, with retries,
	// after the reconcile that emitted them.
	operatorWrites atomic.Int64
	// apiServerClusterIP is Service default/kubernetes's ClusterIP.
	apiServerClusterIP netip.Addr
	// sourceCRDs holds every CRD a catalog entry requires, ready to install.
	sourceCRDs = map[string]*apiextensionsv1.CustomResourceDefinition{}
)

type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && !strings.HasPrefix(req.URL.Path, "/apis/events.k8s.io/") {
		operatorWrites.Add(1)
		if os.Getenv("PORTICO_TEST_LOGS") != "" {
			fmt.Fprintf(os.Stderr, "operator write: %s %s\n", req.Method, req.URL.Path)
		}
	}
	return c.next.RoundTrip(req)
}

func TestMain(m *testing.M) {
	// PORTICO_TEST_LOGS=1 shows the operator's logs.
	if os.Getenv("PORTICO_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	os.Exit(testenv.Run(m, testenv.RunInput{
		// The operator's types (testenv.Scheme's) and the Events the tests read.
		AddToScheme: []func(*runtime.Scheme) error{eventsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme, discoveryv1.AddToScheme},
		Namespaces:  []string{namespace},
		Setup:       startOperator,
	}))
}

// startOperator runs the operator's reconciler in a manager until the
// tests ran.
func startOperator(ctx context.Context, env *testenv.Env) error {
	testCfg, k8sClient = env.Config, env.Client
	if err := loadSourceCRDs(); err != nil {
		return err
	}
	operatorCfg := rest.CopyConfig(testCfg)
	operatorCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt} }
	mgr, err := ctrl.NewManager(operatorCfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  reconciler.CacheOptions(namespace, catalog.Builtin.CRDNames()),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	// As in a pod, where KUBERNETES_SERVICE_HOST is the ClusterIP.
	var kubernetes corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &kubernetes); err != nil {
		return fmt.Errorf("read Service default/kubernetes: %w", err)
	}
	apiServerClusterIP = netip.MustParseAddr(kubernetes.Spec.ClusterIP)
	r := &reconciler.Reconciler{
		Client:    mgr.GetClient(),
		Catalog:   catalog.Builtin,
		Namespace: namespace,
		Images: render.ImageDefaults{
			Registry:      "registry.test/portico",
			Tag:           "v9.9.9",
			RelatedImages: map[string]string{"RELATED_IMAGE_RATELIMIT_CONTROLLER": "mirror.test/ratelimit-controller@sha256:0123"},
		},
		Recorder: mgr.GetEventRecorder(operatorv1alpha1.FieldManager),
		Clock:    clock.RealClock{},
		Metrics:  operatorMetrics,

		APIServerClusterIP: apiServerClusterIP,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("cache did not sync")
	}
	return nil
}

// loadSourceCRDs reads the real Istio CRDs from the istio.io/api module,
// cert-manager's and the Gateway API's from theirs, and the project's
// generated gateway.portico.dev CRDs.
func loadSourceCRDs() error {
	istio, err := testenv.IstioCRDs()
	if err != nil {
		return err
	}
	for _, crd := range istio {
		sourceCRDs[crd.Name] = crd
	}
	certManager, err := testenv.CertManagerCRDs()
	if err != nil {
		return err
	}
	for _, crd := range certManager {
		sourceCRDs[crd.Name] = crd
	}
	gatewayAPI, err := testenv.GatewayAPICRDs()
	if err != nil {
		return err
	}
	for _, crd := range gatewayAPI {
		sourceCRDs[crd.Name] = crd
	}
	for _, plural := range []string{"apirules", "ratelimits"} {
		crds, err := testenv.ReadCRDs(filepath.Join(testenv.ProjectCRDPaths()[0], "gateway.portico.dev_"+plural+".yaml"))
		if err != nil {
			return err
		}
		for _, crd := range crds {
			sourceCRDs[crd.Name] = crd
		}
	}
	for _, name := range allCRDs {
		if _, ok := sourceCRDs[name]; !ok {
			return fmt.Errorf("no source for required CRD %s", name)
		}
	}
	return nil
}

// eventually is the polling budget for what the operator does; it reacts
// in milliseconds, the margin is for a loaded CI machine.
const eventually = 20 * time.Second
