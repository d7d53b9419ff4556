package reconciler_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/operator/internal/reconciler"
)

const rateLimitServiceBinary = "portico-ratelimit-service"

// operatorMetrics are the series of the suite's operator.
var operatorMetrics = reconciler.NewMetrics(prometheus.NewRegistry())

func mode(m string) float64 {
	return testutil.ToFloat64(operatorMetrics.GlobalRateLimitMode.WithLabelValues(m))
}

func serviceGone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Service{}))
	}
}

func containerArgs(g Gomega, name string) []string {
	return getDeployment(g, name).Spec.Template.Spec.Containers[0].Args
}

// The rate-limit service runs only while spec.rateLimits.global is set and
// its Redis Secret exists with an address: the operator follows the
// Secret's coming and going (event-driven), adds the service's Deployment
// and Service and the ratelimit controller's global flags, and removes them
// again.
func TestRateLimitServiceFollowsTheSpecAndTheRedisSecret(t *testing.T) {
	setCRDs(t, allCRDs...)
	ctx := context.Background()
	gw := createGateway(t)

	NewWithT(t).Eventually(func(g Gomega) {
		st := controllerStatus(g, operatorv1alpha1.ControllerRateLimitService)
		g.Expect(st.Phase).To(Equal(operatorv1alpha1.PhaseDisabled))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonNotConfigured))
		g.Expect(st.Message).To(Equal("spec.rateLimits.global is not set"))
		g.Expect(gatewayStatus(g).Ready).To(Equal("0/3"), "a component the spec does not configure is not counted")
		g.Expect(containerArgs(g, "ratelimit-controller")).NotTo(ContainElement(HavePrefix("--global-ratelimit")))
	}, eventually).Should(Succeed())
	g := NewWithT(t)
	g.Expect(deploymentGone(rateLimitServiceBinary)()).To(BeTrue())

	updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.RateLimits = &operatorv1alpha1.RateLimitsSpec{Global: &operatorv1alpha1.GlobalRateLimitsSpec{
			Redis:    operatorv1alpha1.RedisSpec{SecretName: "redis", TLS: true},
			FailOpen: ptr.To(false), Timeout: &metav1.Duration{Duration: 250 * time.Millisecond},
		}}
	})
	g.Eventually(func(g Gomega) {
		st := controllerStatus(g, operatorv1alpha1.ControllerRateLimitService)
		g.Expect(st.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
		g.Expect(st.Reason).To(Equal(operatorv1alpha1.ReasonSecretNotFound))
		g.Expect(st.Message).To(HavePrefix("waiting for Secret " + namespace + "/redis with key address"))
	}, eventually).Should(Succeed())

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "redis", Namespace: namespace},
		Data:       map[string][]byte{"password": []byte("s3cret")},
	}
	g.Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, secret) })
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, operatorv1alpha1.ControllerRateLimitService).Message).To(HaveSuffix("it has no key address"))
	}, eventually).Should(Succeed())

	secret.Data["address"] = []byte("redis.example.com:6380")
	g.Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	d := awaitDeployment(t, rateLimitServiceBinary)
	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(rateLimitServiceBinary))
	g.Expect(pod.Containers[0].Args).To(ContainElements("--grpc-bind-address=:8081", "--redis-config-dir=/etc/portico/redis",
		"--redis-tls=true", "--max-keys-per-rule=10000", "--health-probe-bind-address=:8082"))
	g.Expect(pod.Volumes).To(HaveLen(1))
	g.Expect(pod.Volumes[0].Secret.SecretName).To(Equal("redis"))
	g.Expect(metav1.IsControlledBy(d, gw)).To(BeTrue())

	svc := &corev1.Service{}
	g.Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: rateLimitServiceBinary}, svc)
	}, eventually).Should(Succeed())
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(svc.Spec.Ports[0].Name).To(Equal("grpc-rls"))
	g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(8081))
	g.Expect(svc.Spec.Ports[0].AppProtocol).To(Equal(ptr.To("grpc")))
	g.Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
	g.Expect(metav1.IsControlledBy(svc, gw)).To(BeTrue())

	g.Eventually(func(g Gomega) {
		g.Expect(containerArgs(g, "ratelimit-controller")).To(ContainElements(
			"--global-ratelimit=true", "--global-ratelimit-fail-open=false", "--global-ratelimit-timeout=250ms"))
		p := getPolicy(g, rateLimitServiceBinary)
		g.Expect(p.Spec.Egress).To(HaveLen(3))
		g.Expect(p.Spec.Egress[2].Ports[0].Port.IntValue()).To(Equal(6380))
		g.Expect(p.Spec.Ingress).NotTo(BeEmpty())
		g.Expect(p.Spec.Ingress[0].Ports[0].Port.String()).To(Equal("grpc-rls"))
	}, eventually).Should(Succeed())

	g.Expect(mode(reconciler.ModeFailClosed)).To(Equal(1.0), "the gateways fail closed while the service runs")
	g.Expect(mode(reconciler.ModeFailOpen)).To(BeZero())
	setRollout(t, rateLimitServiceBinary, rolledOut)
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, operatorv1alpha1.ControllerRateLimitService).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		g.Expect(testutil.ToFloat64(operatorMetrics.ReadyReplicas.WithLabelValues("ratelimitservice"))).To(Equal(1.0))
	}, eventually).Should(Succeed())

	// Settled, the operator sends nothing: the server's defaults of the
	// Service (clusterIP, sessionAffinity...) and of the Secret volume do not
	// read as drift.
	expectIdle(t, func() []string {
		d, s := getDeployment(g, rateLimitServiceBinary), &corev1.Service{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: rateLimitServiceBinary}, s)).To(Succeed())
		return []string{d.ResourceVersion, s.ResourceVersion, getDeployment(g, "ratelimit-controller").ResourceVersion}
	})

	// Deleting the Secret takes the service away, and the gateways' flags.
	g.Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
	g.Eventually(deploymentGone(rateLimitServiceBinary), eventually).Should(BeTrue())
	g.Eventually(serviceGone(rateLimitServiceBinary), eventually).Should(BeTrue())
	g.Eventually(policyGone(rateLimitServiceBinary), eventually).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, operatorv1alpha1.ControllerRateLimitService).Reason).To(Equal(operatorv1alpha1.ReasonSecretNotFound))
		g.Expect(containerArgs(g, "ratelimit-controller")).NotTo(ContainElement(HavePrefix("--global-ratelimit")))
		g.Expect(mode(reconciler.ModeFailClosed)).To(BeZero())
	}, eventually).Should(Succeed())

	// Unset: Disabled, NotConfigured.
	updateGateway(t, func(gw *operatorv1alpha1.APIGateway) { gw.Spec.RateLimits = nil })
	g.Eventually(func(g Gomega) {
		g.Expect(controllerStatus(g, operatorv1alpha1.ControllerRateLimitService).Reason).To(Equal(operatorv1alpha1.ReasonNotConfigured))
	}, eventually).Should(Succeed())
}
