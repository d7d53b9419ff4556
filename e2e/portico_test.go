//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	k8snetworkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

const (
	timeout  = 90 * time.Second
	interval = 250 * time.Millisecond
	apirule  = operatorv1alpha1.ControllerAPIRule
	ratelimt = operatorv1alpha1.ControllerRateLimit
)

func gatewayStatus(g Gomega) operatorv1alpha1.APIGatewayStatus {
	gw := &operatorv1alpha1.APIGateway{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: "default"}, gw)).To(Succeed())
	return gw.Status
}

func controllerStatus(g Gomega, name operatorv1alpha1.ControllerName) operatorv1alpha1.ControllerStatus {
	for _, c := range gatewayStatus(g).Controllers {
		if c.Name == name {
			return c
		}
	}
	g.Expect(string(name)).To(BeEmpty(), "no status for controller")
	return operatorv1alpha1.ControllerStatus{}
}

func deployment(g Gomega, name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, d)).To(Succeed())
	return d
}

func isGone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}

func updateGateway(mutate func(*operatorv1alpha1.APIGateway)) {
	Eventually(func() error {
		gw := &operatorv1alpha1.APIGateway{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: "default"}, gw); err != nil {
			return err
		}
		mutate(gw)
		return k8sClient.Update(context.Background(), gw)
	}, timeout, interval).Should(Succeed())
}

func setController(spec operatorv1alpha1.ControllerSpec) {
	updateGateway(func(gw *operatorv1alpha1.APIGateway) {
		gw.Spec.Controllers = slices.DeleteFunc(gw.Spec.Controllers, func(c operatorv1alpha1.ControllerSpec) bool { return c.Name == spec.Name })
		gw.Spec.Controllers = append(gw.Spec.Controllers, spec)
	})
}

// processReady asks a controller's host process for /readyz (local target).
func processReady(deploymentName string) func() int {
	return func() int {
		addr := hostlet.ProbeAddr(deploymentName)
		if addr == "" {
			return 0
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
}

func istioCRDs() []*apiextensionsv1.CustomResourceDefinition {
	crds, err := testenv.IstioCRDs()
	Expect(err).NotTo(HaveOccurred())
	return crds
}

func installIstioCRDs(ctx context.Context) {
	for _, crd := range istioCRDs() {
		err := k8sClient.Create(ctx, crd)
		Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "create %s: %v", crd.Name, err)
	}
}

var _ = Describe("Portico", Ordered, func() {
	shop := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	// gatewayIP is the address of the gateway that routes by the APIRule's
	// VirtualService (targets with real pods).
	var gatewayIP string
	orders := &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts:   []gatewayv1alpha1.Hostname{"orders.example.com"},
			Gateway: "istio-system/public",
			Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules: []gatewayv1alpha1.Rule{
				{Path: "/health", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
				{Path: "/orders/*", JWT: &gatewayv1alpha1.JWTAuthentication{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"}},
			},
		},
	}

	It("reports Warning and names the missing CRDs when Istio is not installed", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: "default"}})).To(Succeed())
		Eventually(func(g Gomega) {
			st := gatewayStatus(g)
			g.Expect(st.State).To(Equal(operatorv1alpha1.StateWarning))
			rule := controllerStatus(g, apirule)
			g.Expect(rule.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
			g.Expect(rule.MissingCRDs).To(ContainElements("virtualservices.networking.istio.io/v1", "authorizationpolicies.security.istio.io/v1"))
			limit := controllerStatus(g, ratelimt)
			g.Expect(limit.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
			g.Expect(limit.Message).To(ContainSubstring("envoyfilters.networking.istio.io/v1alpha3"))
		}, timeout, interval).Should(Succeed())
	})

	It("rolls the controllers out once Istio's CRDs are installed", func(ctx SpecContext) {
		installIstioCRDs(ctx)
		Eventually(func(g Gomega) {
			st := gatewayStatus(g)
			g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
			g.Expect(st.Ready).To(Equal("3/3"))
			g.Expect(deployment(g, "apirule-controller").Status.AvailableReplicas).To(BeEquivalentTo(1))
		}, timeout, interval).Should(Succeed())
		if target == framework.TargetLocal {
			Eventually(processReady("apirule-controller"), timeout, interval).Should(Equal(http.StatusOK))
			Eventually(processReady("ratelimit-controller"), timeout, interval).Should(Equal(http.StatusOK))
			Eventually(processReady("gateway-controller"), timeout, interval).Should(Equal(http.StatusOK))
		}
		By("confining each controller to the API server and DNS with its NetworkPolicy (stored; the node's bridge network does not enforce it)")
		var slice discoveryv1.EndpointSlice
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &slice)).To(Succeed())
		Expect(slice.Endpoints).NotTo(BeEmpty())
		apiServer := slice.Endpoints[0].Addresses[0] + "/32"
		for _, name := range runningControllers {
			Eventually(func(g Gomega) {
				var p k8snetworkingv1.NetworkPolicy
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p)).To(Succeed())
				g.Expect(p.Spec.PodSelector.MatchLabels).To(HaveKeyWithValue("app.kubernetes.io/name", name))
				g.Expect(p.Spec.Egress).To(HaveLen(2))
				g.Expect(p.Spec.Egress[0].To).To(ContainElement(HaveField("IPBlock.CIDR", apiServer)))
			}, timeout, interval).Should(Succeed(), name)
		}
		if target.RealPods() {
			var p k8snetworkingv1.NetworkPolicy
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "portico-operator"}, &p)).To(Succeed(), "the chart's policy of the operator")
			Expect(p.Spec.PolicyTypes).To(ConsistOf(k8snetworkingv1.PolicyTypeIngress, k8snetworkingv1.PolicyTypeEgress))
		}
		if target.RealPods() {
			By("asking each controller pod's readiness endpoint, the one its probe uses")
			for _, name := range runningControllers {
				Eventually(podProbe(ctx, name, "/readyz"), timeout, interval).Should(HaveEach(Equal("ok")), name)
				Eventually(podProbe(ctx, name, "/healthz"), timeout, interval).Should(HaveEach(Equal("ok")), name)
				for _, pod := range podsOf(ctx, name) {
					c := pod.Spec.Containers[0]
					Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
					Expect(pod.Status.ContainerStatuses[0].Ready).To(BeTrue(), "the kubelet's readiness probe of %s passed", pod.Name)
				}
			}
		}
	})

	It("enforces the restricted Pod Security Standard on "+namespace+" and admits every Portico pod", func(ctx SpecContext) {
		if !target.RealPods() {
			Skip("kwok clusters run without admission plugins")
		}
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: namespace}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

		By("rejecting a pod that runs as root with privilege escalation")
		bad := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "not-restricted", Namespace: namespace},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: agentImage()}}},
		}
		err := k8sClient.Create(ctx, bad, client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))

		By("admitting and running the operator and every controller")
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
		names := []string{}
		for _, p := range pods.Items {
			names = append(names, p.Labels["app.kubernetes.io/name"])
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
		}
		Expect(names).To(ContainElements(append([]string{"portico-operator"}, runningControllers...)))
	})

	It("turns an APIRule into Istio objects", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, shop)).To(Succeed())
		// On the node target, istiod's setup made istio-system already.
		createOrExisting(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}})
		Expect(k8sClient.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "orders"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		})).To(Succeed())
		public := &networkingv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "public", Namespace: "istio-system"}}
		public.Spec.Selector = map[string]string{"istio": "ingressgateway"}
		public.Spec.Servers = []*networkingapi.Server{{Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"}}}
		Expect(k8sClient.Create(ctx, public)).To(Succeed())
		Expect(k8sClient.Create(ctx, orders.DeepCopy())).To(Succeed())

		Eventually(func(g Gomega) {
			vs := &networkingv1.VirtualService{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, vs)).To(Succeed())
			g.Expect(vs.Spec.Hosts).To(Equal([]string{"orders.example.com"}))
			g.Expect(vs.Spec.Http).To(HaveLen(2))
			ap := &securityv1.AuthorizationPolicy{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, ap)).To(Succeed())
			g.Expect(ap.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "orders"}))
			ra := &securityv1.RequestAuthentication{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, ra)).To(Succeed())
			g.Expect(ra.Spec.JwtRules[0].Issuer).To(Equal("https://idp.example.com"))
		}, timeout, interval).Should(Succeed())
	})

	istiodWebhookSpecs()

	It("routes a request from a pod through the APIRule's VirtualService to its Service", func(ctx SpecContext) {
		if !target.RealPods() {
			Skip("kwok runs no containers")
		}
		By("running the orders backend behind the orders Service and a gateway that routes by VirtualServices")
		gatewayIP = deployTrafficPath(ctx)

		By("sending requests from a client pod")
		// /orders/* is a prefix route to a JWT rule: without a token, the
		// backend's sidecar (programmed by istiod) refuses it (403, its
		// AuthorizationPolicy wants a request principal); plain backends
		// (no istiod) answer it. sidecarTokenSpecs sends tokens.
		orders := []string{"--expect-status", "200", "--expect-body", "orders GET /orders/42"}
		if sidecarsEnforce() {
			orders = []string{"--expect-status", "403", "--expect-body", "RBAC: access denied"}
		}
		answers := requestFromPod(ctx, map[string][]string{
			// /health is open to everyone for GET: routed to the backend.
			"health": {"http://" + gatewayIP + "/health", "--host", "orders.example.com", "--expect-status", "200", "--expect-body", "orders GET /health"},
			"orders": append([]string{"http://" + gatewayIP + "/orders/42", "--host", "orders.example.com"}, orders...),
			// Only GET is allowed on /health: no route matches a DELETE.
			"method": {"http://" + gatewayIP + "/health", "--method", "DELETE", "--host", "orders.example.com", "--expect-status", "404"},
			// Hosts outside the APIRule are not routed.
			"host": {"http://" + gatewayIP + "/health", "--host", "other.example.com", "--expect-status", "404"},
		})
		Expect(answers["health"]).To(ContainSubstring("200 orders GET /health"))
		if !sidecarsEnforce() {
			Expect(answers["orders"]).To(ContainSubstring("200 orders GET /orders/42"))
		}
	})

	apiRuleFeatureSpecs(&gatewayIP)

	sidecarTokenSpecs(&gatewayIP)

	defaultGatewaySpecs()

	It("enforces a RateLimit with an EnvoyFilter on the gateway workload", func(ctx SpecContext) {
		if !target.RealPods() {
			By("running pods for the Gateway's selector (kwok fakes them), where the EnvoyFilter applies")
			runGatewayPods(ctx)
		}
		Expect(k8sClient.Create(ctx, &gatewayv1alpha1.RateLimit{
			ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
			Spec: gatewayv1alpha1.RateLimitSpec{
				TargetRef: gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetAPIRule, Name: "orders"},
				Local:     &gatewayv1alpha1.TokenBucket{MaxTokens: 100, TokensPerFill: 10, FillInterval: metav1.Duration{Duration: time.Second}},
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			var filters networkingv1alpha3.EnvoyFilterList
			g.Expect(k8sClient.List(ctx, &filters, client.InNamespace("istio-system"))).To(Succeed())
			g.Expect(filters.Items).To(HaveLen(1))
			g.Expect(filters.Items[0].Spec.WorkloadSelector.Labels).To(Equal(map[string]string{"istio": "ingressgateway"}))
			g.Expect(filters.Items[0].Spec.ConfigPatches).To(HaveLen(3), "the local rate limit filter and one patch per APIRule route")
		}, timeout, interval).Should(Succeed())
	})

	globalRateLimitSpecs()

	loginSpecs()

	It("removes only the ratelimit controller when the EnvoyFilter CRD is deleted; apirule keeps serving", func(ctx SpecContext) {
		before := deployment(Default, "apirule-controller")
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "envoyfilters.networking.istio.io"}}
		faultAt := time.Now()
		Expect(k8sClient.Delete(ctx, crd)).To(Succeed())
		Eventually(isGone(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ratelimit-controller"}}), timeout, interval).Should(BeTrue())
		Eventually(func(g Gomega) {
			limit := controllerStatus(g, ratelimt)
			g.Expect(limit.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
			g.Expect(limit.MissingCRDs).To(Equal([]string{"envoyfilters.networking.istio.io/v1alpha3"}))
		}, timeout, interval).Should(Succeed())
		Expect(deployment(Default, "apirule-controller").UID).To(Equal(before.UID))

		By("changing the APIRule, which the apirule controller still applies")
		Eventually(func() error {
			r := &gatewayv1alpha1.APIRule{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(orders), r); err != nil {
				return err
			}
			r.Spec.Timeout = &metav1.Duration{Duration: 15 * time.Second}
			return k8sClient.Update(ctx, r)
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			vs := &networkingv1.VirtualService{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, vs)).To(Succeed())
			g.Expect(vs.Spec.Http).NotTo(BeEmpty())
			g.Expect(vs.Spec.Http[0].Timeout.AsDuration()).To(Equal(15 * time.Second))
		}, timeout, interval).Should(Succeed())

		blocked := map[string]string{"controller": string(ratelimt)}
		var fired time.Duration
		if promURL != "" {
			fired = alertFires("PorticoControllerBlocked", blocked, faultAt)
		}

		By("installing the EnvoyFilter CRD again")
		Eventually(isGone(crd), timeout, interval).Should(BeTrue())
		fixAt := time.Now()
		installIstioCRDs(ctx)
		Eventually(func(g Gomega) { g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady)) }, timeout, interval).Should(Succeed())
		if promURL != "" {
			alertResolves("PorticoControllerBlocked", blocked, "EnvoyFilter CRD deleted (ratelimit)", fired, fixAt)
		}
	})

	It("recreates a controller Deployment deleted by hand", func(ctx SpecContext) {
		old := deployment(Default, "ratelimit-controller")
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(deployment(g, "ratelimit-controller").UID).NotTo(Equal(old.UID)) }, timeout, interval).Should(Succeed())
	})

	disruptionBudgetSpecs()

	It("removes the EnvoyFilters it wrote when the ratelimit controller is disabled, and writes them again when enabled", func(ctx SpecContext) {
		managed := func(g Gomega) []*networkingv1alpha3.EnvoyFilter {
			var filters networkingv1alpha3.EnvoyFilterList
			g.Expect(k8sClient.List(ctx, &filters, client.MatchingLabels{"app.kubernetes.io/managed-by": "ratelimit-controller"})).To(Succeed())
			return filters.Items
		}
		Eventually(managed, timeout, interval).Should(HaveLen(1))
		By("waiting for the running controller (the previous spec replaced it), which is the one that cleans up")
		Eventually(func(g Gomega) {
			d := deployment(g, "ratelimit-controller")
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.AvailableReplicas).To(BeNumerically(">=", 1))
			g.Expect(controllerStatus(g, ratelimt).Phase).To(Equal(operatorv1alpha1.PhaseReady))
		}, timeout, interval).Should(Succeed())

		setController(operatorv1alpha1.ControllerSpec{Name: ratelimt, Enabled: ptr.To(false)})
		Eventually(isGone(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ratelimit-controller"}}), timeout, interval).Should(BeTrue())
		By("letting the stopping controller remove its filters: nothing would maintain them")
		Eventually(managed, timeout, interval).Should(BeEmpty())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &gatewayv1alpha1.RateLimit{})).To(Succeed(), "the user's RateLimit stays")

		setController(operatorv1alpha1.ControllerSpec{Name: ratelimt, Enabled: ptr.To(true)})
		Eventually(managed, timeout, interval).Should(HaveLen(1))
		Eventually(func(g Gomega) { g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady)) }, timeout, interval).Should(Succeed())
	})

	It("reverts an image edited by hand", func(ctx SpecContext) {
		want := deployment(Default, "apirule-controller").Spec.Template.Spec.Containers[0].Image
		Eventually(func() error {
			d := deployment(Default, "apirule-controller")
			d.Spec.Template.Spec.Containers[0].Image = "evil.example/apirule:latest"
			return k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(deployment(g, "apirule-controller").Spec.Template.Spec.Containers[0].Image).To(Equal(want))
		}, timeout, interval).Should(Succeed())
	})

	It("rolls out a new image set in the APIGateway: Progressing, then Ready", func(ctx SpecContext) {
		var list operatorv1alpha1.APIGatewayList
		w, err := k8sClient.Watch(ctx, &list)
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		image := nextAPIRuleImage
		setController(operatorv1alpha1.ControllerSpec{Name: apirule, Image: image})

		seen := []operatorv1alpha1.ControllerPhase{}
		Eventually(func() []operatorv1alpha1.ControllerPhase {
			for {
				select {
				case ev := <-w.ResultChan():
					if ev.Type != watch.Modified {
						continue
					}
					for _, c := range ev.Object.(*operatorv1alpha1.APIGateway).Status.Controllers {
						if c.Name == apirule && c.Image == image && (len(seen) == 0 || seen[len(seen)-1] != c.Phase) {
							seen = append(seen, c.Phase)
						}
					}
				default:
					return seen
				}
			}
		}, timeout, 50*time.Millisecond).Should(ContainElement(operatorv1alpha1.PhaseReady))
		Expect(seen[0]).To(Equal(operatorv1alpha1.PhaseProgressing), "phases seen: %v", seen)
		Expect(deployment(Default, "apirule-controller").Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	})

	It("reports Degraded naming the cause when a rollout cannot progress", func(ctx SpecContext) {
		faultAt := time.Now()
		if target.RealPods() {
			setController(operatorv1alpha1.ControllerSpec{Name: ratelimt, Image: imageRegistry + "/does-not-exist:never"})
			Eventually(func(g Gomega) {
				limit := controllerStatus(g, ratelimt)
				g.Expect(limit.Phase).To(Equal(operatorv1alpha1.PhaseDegraded))
				g.Expect(limit.Reason).To(Equal(operatorv1alpha1.ReasonImagePullFailed))
				g.Expect(limit.Message).To(ContainSubstring("container manager"))
			}, 3*timeout, interval).Should(Succeed())
		} else {
			// No node matches: the new pod stays Pending past the deadline.
			setController(operatorv1alpha1.ControllerSpec{Name: ratelimt, NodeSelector: map[string]string{"portico.dev/e2e": "nowhere"}})
			Eventually(func(g Gomega) {
				limit := controllerStatus(g, ratelimt)
				g.Expect(limit.Phase).To(Equal(operatorv1alpha1.PhaseDegraded))
				g.Expect(limit.Reason).To(Equal(operatorv1alpha1.ReasonProgressDeadlineExceeded))
				g.Expect(limit.Message).To(ContainSubstring("ratelimit-controller exceeded its progress deadline"))
				g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateError))
			}, timeout, interval).Should(Succeed())
		}
		degraded := map[string]string{"controller": string(ratelimt)}
		var fired time.Duration
		if promURL != "" {
			fired = alertFires("PorticoControllerDegraded", degraded, faultAt)
		}
		By("undoing the change, which recovers")
		fixAt := time.Now()
		setController(operatorv1alpha1.ControllerSpec{Name: ratelimt})
		Eventually(func(g Gomega) { g.Expect(controllerStatus(g, ratelimt).Phase).To(Equal(operatorv1alpha1.PhaseReady)) }, 2*timeout, interval).Should(Succeed())
		if promURL != "" {
			alertResolves("PorticoControllerDegraded", degraded, "image that cannot be pulled (ratelimit)", fired, fixAt)
		}
	})

	notReadyAlertSpecs()
	quarantineAlertSpec()
	noLeaderAlertSpec()
	writeErrorsAlertSpec()

	It("upgrades with helm to the next release while the APIRule's routes keep answering, then rolls back", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("releases are published to the node target's registry")
		}
		By("returning every controller to the release's default image")
		updateGateway(func(gw *operatorv1alpha1.APIGateway) { gw.Spec.Controllers = nil })
		Eventually(func(g Gomega) {
			st := gatewayStatus(g)
			g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
			for _, c := range slices.Collect(filterStatus(st.Controllers)) {
				g.Expect(c.Image).To(Equal(releaseImage(releaseV1, string(c.Name)+"-controller")))
				g.Expect(c.ImageID).To(HaveSuffix("@" + digestOf(c.Image)))
			}
		}, 2*timeout, interval).Should(Succeed())

		By("helm upgrade to " + releaseV2)
		rollTo(ctx, releaseV2, gatewayIP, "upgrade", release, "oci://"+registryRepo+"/charts/portico", "--version", releaseV2, "--plain-http")
		out, err := framework.Run(ctx, root, "hack/node.sh", "status", nodeClusterName)
		Expect(err).NotTo(HaveOccurred(), out)

		By("helm rollback to " + releaseV1)
		rollTo(ctx, releaseV1, gatewayIP, "rollback", release, "1")
	})

	// The Gateway API specs run late in the suite: their Traefik (built from
	// its Go module, minutes on a cold machine) has had the time the specs
	// before them spend waiting for pods and rollouts to finish building.
	gatewayAPISpecs(orders)
	// The same story on Istio: istiod answers for GatewayClass istio.
	istioGatewayAPISpecs(orders)

	scrapedMetricsSpec()

	It("removes every controller when the APIGateway is deleted, leaving users' objects", func(ctx SpecContext) {
		Expect(k8sClient.Delete(ctx, &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: "default"}})).To(Succeed())
		for _, name := range runningControllers {
			Eventually(isGone(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}), timeout, interval).Should(BeTrue())
		}
		if target == framework.TargetLocal {
			Eventually(hostlet.Running, timeout, interval).Should(BeEmpty(), "the hostlet stopped the controller processes")
		}
		if target.RealPods() {
			for _, name := range runningControllers {
				Eventually(func() []corev1.Pod { return podsOf(ctx, name) }, timeout, interval).Should(BeEmpty(), "the pods of %s are gone", name)
			}
		}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(orders), &gatewayv1alpha1.APIRule{})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &networkingv1.VirtualService{})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &gatewayv1alpha1.RateLimit{})).To(Succeed())
	})

	It("keeps the CRDs and users' objects on helm uninstall", func(ctx SpecContext) {
		if target == framework.TargetLocal {
			operator.Stop() // uninstalling removes the operator's Deployment and RBAC
		}
		_, err := framework.Run(ctx, root, testbin+"/helm", "uninstall", release, "--kubeconfig", kubeconfig, "--namespace", namespace, "--wait")
		Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{"apigateways.operator.portico.dev", "apirules.gateway.portico.dev", "ratelimits.gateway.portico.dev"} {
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), name)
		}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(orders), &gatewayv1alpha1.APIRule{})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, &networkingv1.VirtualService{})).To(Succeed())
	})

	// Then OLM installs Portico again, over what helm left.
	olmSpecs(&gatewayIP)
	// And the cluster moves it to OLM v1 (E2E_OLMV1=0 leaves it out).
	if olmV1Enabled() {
		olmV1Specs(&gatewayIP)
	}
})
