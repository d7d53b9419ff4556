package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/metrics"
	"github.com/portico-dev/portico/test/testenv"
)

// sample is the value of a series of the controller's registry now.
var sample = testenv.SampleOf

// The serving certificate's expiry is exported by the elected manager, from
// the status the controller wrote, and only while it runs; the objects the
// controller writes are counted by kind.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	written := func(kind, op string) map[string]string {
		return map[string]string{"controller": "gateway", "kind": kind, "operation": op}
	}
	kinds := []string{"Secret", "ConfigMap", "Gateway", "VirtualService"}
	before := map[string]float64{}
	for _, kind := range kinds {
		before[kind] = sample(g, "portico_objects_written_total", written(kind, metrics.Create))
	}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionNamespace: ns, LeaderElectionID: "gateway-metrics-test", LeaderElectionReleaseOnCancel: true,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(certificateExpiry.Serve(mgr)).To(Succeed())
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// The controller's watch of the APIGateway, which the gauge reads.
	_, err = mgr.GetCache().GetInformer(ctx, &operatorv1alpha1.APIGateway{})
	g.Expect(err).NotTo(HaveOccurred())

	r := newReconciler(clocktesting.NewFakeClock(start))
	setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "metrics.example.com"})
	st := reconcileOnce(t, r)
	g.Expect(st.State).To(Equal(operatorv1alpha1.GatewayReady), st.Message)
	g.Expect(st.NotAfter).NotTo(BeNil())
	for _, kind := range kinds {
		g.Expect(sample(g, "portico_objects_written_total", written(kind, metrics.Create))).To(BeNumerically(">", before[kind]), kind)
	}
	g.Expect(sample(g, "portico_objects_written_total", written("Secret", metrics.Create))).To(BeNumerically(">=", before["Secret"]+2),
		"the CA and the serving certificate")
	g.Expect(testutil.CollectAndCount(certificateExpiry)).To(BeZero(), "no manager elected yet")

	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	expiry := map[string]string{"gateway": "istio-system/portico-gateway"}
	g.Eventually(func() float64 { return sample(g, "portico_gateway_certificate_expiry_timestamp_seconds", expiry) }, "20s").
		Should(Equal(float64(st.NotAfter.Unix())))
	g.Expect(testutil.CollectAndCount(certificateExpiry)).To(Equal(1))

	t.Run("no certificate, no series", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, nil)
		reconcileOnce(t, r)
		g.Eventually(func() int { return testutil.CollectAndCount(certificateExpiry) }, "20s").Should(BeZero())
	})

	t.Run("a stopped manager exports nothing", func(t *testing.T) {
		g := NewWithT(t)
		setGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "metrics.example.com"})
		reconcileOnce(t, r)
		g.Eventually(func() int { return testutil.CollectAndCount(certificateExpiry) }, "20s").Should(Equal(1))
		stop()
		g.Expect(<-done).To(Succeed())
		g.Expect(testutil.CollectAndCount(certificateExpiry)).To(BeZero())
		setGateway(t, nil)
		reconcileOnce(t, r)
	})
}
