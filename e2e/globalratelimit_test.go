//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/test/framework"
)

// The global rate limit story's names: the tenant namespace ratelimits
// runs three replicas of the gateway stand-in for its own Istio Gateway
// edge, an APIRule for the host rl.example.com to its echo backend, and a
// gateway-wide RateLimit with global rules.
const (
	rlNamespace = "ratelimits"
	rlGateway   = "edge"
	rlHost      = "rl.example.com"
	rlReplicas  = 3
	// rlPort is the port of the Gateway's server, where the stand-ins
	// bind istiod's listener for it (no Service maps it).
	rlPort        = 80
	redisSecret   = "redis"
	sharedBudget  = 12
	perKeyBudget  = 5
	globalReport  = "global-ratelimit-report.txt"
	rlServiceName = "ratelimitservice"
)

// redis is the Redis server host process; the spec stops it.
var redis *framework.Process

// startRedis runs Debian's redis-server (hack/redis.sh) on the node, on
// every address at port, with a password and no persistence.
func startRedis(ctx context.Context, binary string, port int, password string) {
	var err error
	redis, err = framework.StartProcess(binary, []string{
		"--port", strconv.Itoa(port), "--bind", "0.0.0.0", "--protected-mode", "no",
		"--requirepass", password, "--save", "", "--appendonly", "no",
	}, nil, filepath.Join(artifacts, "redis.log"))
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}, timeout, interval).Should(Succeed(), "redis-server listens")
}

// nodeAddress is the node's InternalIP, where its pods reach host processes.
func nodeAddress(ctx context.Context) string {
	var nodes corev1.NodeList
	Expect(k8sClient.List(ctx, &nodes)).To(Succeed())
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	Fail("no node has an InternalIP")
	return ""
}

// deployRateLimitedGateway runs, in namespace ratelimits, the echo backend,
// three gateway stand-ins that apply the global rate limits of the
// EnvoyFilters reaching their pods, their Istio Gateway and an APIRule,
// and returns the stand-ins' pod IPs.
func deployRateLimitedGateway(ctx context.Context) []string {
	ns := restrictedNamespace(rlNamespace)
	createOrExisting(ctx, ns)
	labels := map[string]string{"app": "rl-gateway"}
	createOrExisting(ctx, agentDeployment(rlNamespace, "echo", map[string]string{"app": "echo"}, "default", "backend", "--name", "echo"))
	createOrExisting(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: rlNamespace},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "echo"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	})
	createOrExisting(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "rl-gateway", Namespace: rlNamespace}})
	createOrExisting(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-rl-gateway"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-e2e-gateway"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "rl-gateway", Namespace: rlNamespace}},
	})
	// No Service selects these pods: istiod's listener is on the Gateway
	// server's own port, rlPort, and the stand-ins bind it there.
	gwArgs := append([]string{"gateway"}, gatewayStandInArgs(gatewayXDSAddress(), labels, rlNamespace+"/"+rlGateway)...)
	gw := asGatewayPods(withProxyIdentity(agentDeployment(rlNamespace, "rl-gateway", labels, "rl-gateway",
		append(gwArgs, "--workload-namespace", rlNamespace, "--workload-labels", "app=rl-gateway")...)), gatewayXDSAddress())
	gw.Spec.Replicas = ptr.To[int32](rlReplicas)
	createOrExisting(ctx, gw)
	createOrExisting(ctx, &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: rlGateway, Namespace: rlNamespace},
		Spec: networkingapi.Gateway{Selector: labels, Servers: []*networkingapi.Server{{
			Port: &networkingapi.Port{Number: rlPort, Name: "http", Protocol: "HTTP"}, Hosts: []string{rlHost},
		}}},
	})
	createOrExisting(ctx, &gatewayv1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: rlNamespace},
		Spec: gatewayv1alpha1.APIRuleSpec{
			Hosts: []gatewayv1alpha1.Hostname{rlHost}, Gateway: rlNamespace + "/" + rlGateway,
			Service: &gatewayv1alpha1.ServiceReference{Name: "echo", Port: 8080},
			Rules:   []gatewayv1alpha1.Rule{{Path: "/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}},
		},
	})
	var ips []string
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: rlNamespace, Name: "rl-gateway"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(rlReplicas))
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(rlNamespace), client.MatchingLabels(labels))).To(Succeed())
		ips = nil
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
				ips = append(ips, p.Status.PodIP)
			}
		}
		g.Expect(ips).To(HaveLen(rlReplicas))
		g.Expect(apiRuleReady(g, client.ObjectKey{Namespace: rlNamespace, Name: "echo"}).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	return ips
}

// tally counts the answers of each replica.
type tally map[string]map[int]int

func (t tally) total(code int) int {
	n := 0
	for _, codes := range t {
		n += codes[code]
	}
	return n
}

// sendRound sends n requests, round robin over the replicas, with the
// headers, and counts the answers per replica.
func sendRound(ctx context.Context, replicas []string, n int, headers map[string]string) tally {
	t := tally{}
	c := &http.Client{Timeout: 5 * time.Second}
	for i := range n {
		ip := replicas[i%len(replicas)]
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, strconv.Itoa(rlPort))+"/", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Host = rlHost
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		if t[ip] == nil {
			t[ip] = map[int]int{}
		}
		t[ip][resp.StatusCode]++
	}
	compareRateLimited(ctx, rlNamespace+"/"+rlGateway, rlHost, headers, t) // explain_test.go
	return t
}

func (t tally) String() string {
	var parts []string
	for ip, codes := range t {
		raw, _ := json.Marshal(codes)
		parts = append(parts, ip+" "+string(raw))
	}
	return strings.Join(parts, "; ")
}

// globalLimitEnforced waits until the RateLimit is Enforced and its
// EnvoyFilter (in the tenant's namespace) has failure_mode_deny as wanted.
func globalLimitEnforced(ctx context.Context, name string, failClosed bool) {
	Eventually(func(g Gomega) {
		l := &gatewayv1alpha1.RateLimit{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: rlNamespace, Name: name}, l)).To(Succeed())
		ready := apimeta.FindStatusCondition(l.Status.Conditions, gatewayv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonEnforced), ready.Message)
		g.Expect(l.Status.EnvoyFilters).To(HaveLen(1))
		ns, efName, _ := strings.Cut(l.Status.EnvoyFilters[0], "/")
		ef := &networkingv1alpha3.EnvoyFilter{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: efName}, ef)).To(Succeed())
		raw, err := json.Marshal(&ef.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(raw)).To(ContainSubstring(fmt.Sprintf(`"failure_mode_deny":%t`, failClosed)))
	}, timeout, interval).Should(Succeed())
}

// serviceReady waits until the rate-limit service's status entry is, or is
// not, Ready, and returns it.
func serviceReady(ready bool) operatorv1alpha1.ControllerStatus {
	var st operatorv1alpha1.ControllerStatus
	Eventually(func(g Gomega) {
		st = controllerStatus(g, rlServiceName)
		g.Expect(st.Phase == operatorv1alpha1.PhaseReady).To(Equal(ready), "%s: %s %s", rlServiceName, st.Phase, st.Message)
	}, timeout, interval).Should(Succeed())
	return st
}

// globalRateLimitSpecs are the story of global rate limits on real parts:
// the administrator runs Redis (Debian's redis-server, on the node) and
// enables global limits in the APIGateway with a Secret naming it; the
// operator runs Portico's rate-limit service; a tenant's RateLimit with
// global rules becomes its filter on its gateway's three replicas (the
// stand-in, which calls the service with the descriptors the filter
// configures, as Envoy's filter does). A shared budget of N admits exactly
// N requests across the three replicas; a per-client budget admits N per
// API key (and N for requests without one); with Redis stopped the gateways
// fail open (the default), the service reports not ready and, where
// Prometheus runs, PorticoGlobalRateLimitUnavailable fires; a restarted
// service keeps the counts in Redis; failing closed, the gateways refuse
// requests while Redis is down. Counts go to
// e2e/_artifacts/global-ratelimit-report.txt. The node target only: its pods
// reach the host's Redis at the node's address.
func globalRateLimitSpecs() {
	It("keeps one global budget across three gateway replicas and one per API key, with a real Redis and Portico's rate-limit service, and fails open or closed as configured", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("Redis runs on the node target's host")
		}
		out, err := framework.Run(ctx, root, "hack/redis.sh")
		Expect(err).NotTo(HaveOccurred(), out)
		binary := framework.LastLine(out)
		port := int(freePort())
		buf := make([]byte, 16)
		_, _ = rand.Read(buf)
		password := hex.EncodeToString(buf)
		startRedis(ctx, binary, port, password)
		DeferCleanup(func() {
			if redis != nil {
				redis.Stop()
			}
		})
		address := net.JoinHostPort(nodeAddress(ctx), strconv.Itoa(port))

		By("enabling global rate limits with the administrator's Redis Secret")
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: redisSecret, Namespace: namespace},
			StringData: map[string]string{"address": address, "password": password},
		}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, secret) })
		enabledAt := time.Now()
		updateGateway(func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.RateLimits = &operatorv1alpha1.RateLimitsSpec{Global: &operatorv1alpha1.GlobalRateLimitsSpec{
				Redis: operatorv1alpha1.RedisSpec{SecretName: redisSecret},
			}}
		})
		DeferCleanup(func() { updateGateway(func(gw *operatorv1alpha1.APIGateway) { gw.Spec.RateLimits = nil }) })
		serviceReady(true)
		reportTo(globalReport, "rate-limit service Ready %s after global limits were enabled", time.Since(enabledAt).Round(time.Second))

		replicas := deployRateLimitedGateway(ctx)
		DeferCleanup(func(ctx SpecContext) {
			_ = k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rlNamespace}})
			_ = k8sClient.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-rl-gateway"}})
		})
		// Registered after the namespace's deletion, so it runs before it.
		DeferCleanup(func(ctx SpecContext) {
			if CurrentSpecReport().Failed() {
				savePodLogs(ctx, rlNamespace, "app=rl-gateway", "global-ratelimit")
				savePodLogs(ctx, namespace, "app.kubernetes.io/name=portico-ratelimit-service", "global-ratelimit")
			}
		})
		limit := &gatewayv1alpha1.RateLimit{
			ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: rlNamespace},
			Spec: gatewayv1alpha1.RateLimitSpec{
				TargetRef: gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetGateway, Name: rlGateway},
				Global: &gatewayv1alpha1.GlobalRateLimit{Rules: []gatewayv1alpha1.GlobalRule{
					// Budgets per day: no window ends during the spec.
					{Name: "shared", Requests: sharedBudget, Unit: gatewayv1alpha1.UnitDay,
						Match: &gatewayv1alpha1.GlobalMatch{Header: &gatewayv1alpha1.HeaderMatch{Name: "x-test", Value: "shared"}}},
					{Name: "per-key", Requests: perKeyBudget, Unit: gatewayv1alpha1.UnitDay, Algorithm: gatewayv1alpha1.AlgorithmTokenBucket,
						Match:      &gatewayv1alpha1.GlobalMatch{Header: &gatewayv1alpha1.HeaderMatch{Name: "x-test", Value: "keyed"}},
						ClientKeys: []gatewayv1alpha1.ClientKey{{Type: gatewayv1alpha1.ClientKeyHeader, Header: "x-api-key"}}},
					// One request a day: a replica that answers a probe
					// with 429 enforces the limits (see below).
					{Name: "probe", Requests: 1, Unit: gatewayv1alpha1.UnitDay,
						Match: &gatewayv1alpha1.GlobalMatch{Header: &gatewayv1alpha1.HeaderMatch{Name: "x-test", Value: "probe"}}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, limit)).To(Succeed())
		globalLimitEnforced(ctx, limit.Name, false)
		// The stand-ins re-read the EnvoyFilters every second, and the
		// service its ConfigMaps on every change.
		Eventually(func(g Gomega) {
			t := sendRound(ctx, replicas, 1, map[string]string{"x-test": "probe"})
			g.Expect(t.total(http.StatusOK) + t.total(http.StatusTooManyRequests)).To(Equal(1))
		}, timeout, interval).Should(Succeed())
		// Every replica takes its filters from its own configuration
		// (istiod pushes to each proxy): the shared budget is counted only
		// once each one refuses a probe over the probe rule's budget of 1,
		// i.e. asks the rate-limit service, which has the rules too.
		for _, ip := range replicas {
			Eventually(func(g Gomega) {
				t := sendRound(ctx, []string{ip}, 1, map[string]string{"x-test": "probe"})
				g.Expect(t.total(http.StatusTooManyRequests)).To(Equal(1), "replica %s does not enforce the probe rule yet: %s", ip, t)
			}, timeout, interval).Should(Succeed())
		}

		By("admitting exactly the shared budget across the three replicas")
		shared := sendRound(ctx, replicas, 3*sharedBudget, map[string]string{"x-test": "shared"})
		reportTo(globalReport, "shared budget %d, %d requests round robin over %d replicas: allowed %d, refused %d; per replica: %s",
			sharedBudget, 3*sharedBudget, rlReplicas, shared.total(http.StatusOK), shared.total(http.StatusTooManyRequests), shared)
		Expect(shared.total(http.StatusOK)).To(Equal(sharedBudget), shared.String())
		Expect(shared.total(http.StatusTooManyRequests)).To(Equal(2*sharedBudget), shared.String())
		for ip, codes := range shared {
			Expect(codes[http.StatusTooManyRequests]).To(BeNumerically(">", 0), "replica %s refuses once the shared budget is spent", ip)
		}

		By("admitting the per-key budget to each API key, and to the requests without one")
		for _, key := range []string{"key-a", "key-b", "key-c", ""} {
			headers := map[string]string{"x-test": "keyed"}
			if key != "" {
				headers["x-api-key"] = key
			}
			t := sendRound(ctx, replicas, 3*perKeyBudget, headers)
			reportTo(globalReport, "per-key budget %d, key %q: allowed %d, refused %d; per replica: %s",
				perKeyBudget, key, t.total(http.StatusOK), t.total(http.StatusTooManyRequests), t)
			Expect(t.total(http.StatusOK)).To(Equal(perKeyBudget), "key %q: %s", key, t)
		}

		By("failing open while Redis is down: the service reports not ready, requests pass")
		faultAt := time.Now()
		redis.Stop()
		down := serviceReady(false)
		reportTo(globalReport, "Redis stopped: the rate-limit service not ready after %s (%s: %s)", time.Since(faultAt).Round(time.Second), down.Reason, down.Message)
		var fired time.Duration
		if promURL != "" {
			fired = alertFires("PorticoGlobalRateLimitUnavailable", nil, faultAt)
			reportTo(globalReport, "PorticoGlobalRateLimitUnavailable fired %s after Redis stopped", fired.Round(time.Second))
		}
		open := sendRound(ctx, replicas, 3*sharedBudget, map[string]string{"x-test": "shared"})
		reportTo(globalReport, "fail open, Redis down: %d requests over the spent shared budget: allowed %d; per replica: %s", 3*sharedBudget, open.total(http.StatusOK), open)
		Expect(open.total(http.StatusOK)).To(Equal(3*sharedBudget), open.String())

		By("enforcing again with a restarted Redis (empty: the budgets start anew)")
		restartAt := time.Now()
		startRedis(ctx, binary, port, password)
		serviceReady(true)
		if promURL != "" {
			alertResolves("PorticoGlobalRateLimitUnavailable", nil, "Redis stopped (fail open)", fired, restartAt)
		}
		var again tally
		Eventually(func(g Gomega) {
			again = sendRound(ctx, replicas, 1, map[string]string{"x-test": "shared", "x-round": "restart"})
			g.Expect(again.total(http.StatusOK)).To(Equal(1))
		}, timeout, interval).Should(Succeed())
		rest := sendRound(ctx, replicas, 3*sharedBudget, map[string]string{"x-test": "shared"})
		reportTo(globalReport, "Redis restarted: allowed %d of %d (budget %d, one spent probing)", rest.total(http.StatusOK), 3*sharedBudget, sharedBudget)
		Expect(rest.total(http.StatusOK)).To(Equal(sharedBudget-1), rest.String())

		By("keeping the counts across a restart of the service")
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{operatorv1alpha1.LabelController: rlServiceName})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for i := range pods.Items {
			Expect(k8sClient.Delete(ctx, &pods.Items[i])).To(Succeed())
		}
		serviceReady(true)
		Eventually(func(g Gomega) {
			t := sendRound(ctx, replicas, rlReplicas, map[string]string{"x-test": "shared"})
			g.Expect(t.total(http.StatusTooManyRequests)).To(Equal(rlReplicas), "the spent budget is still spent: %s", t)
		}, timeout, interval).Should(Succeed())
		reportTo(globalReport, "the rate-limit service's pods replaced: the spent shared budget stays spent (counts live in Redis)")

		By("failing closed when the administrator says so")
		updateGateway(func(gw *operatorv1alpha1.APIGateway) { gw.Spec.RateLimits.Global.FailOpen = ptr.To(false) })
		globalLimitEnforced(ctx, limit.Name, true)
		time.Sleep(2 * time.Second)
		redis.Stop()
		serviceReady(false)
		closed := sendRound(ctx, replicas, 3*perKeyBudget, map[string]string{"x-test": "keyed", "x-api-key": "key-d"})
		reportTo(globalReport, "fail closed, Redis down: %d requests: refused with 500: %d; per replica: %s", 3*perKeyBudget, closed.total(http.StatusInternalServerError), closed)
		Expect(closed.total(http.StatusInternalServerError)).To(Equal(3*perKeyBudget), closed.String())
		startRedis(ctx, binary, port, password)
		serviceReady(true)

		By("removing the service when global limits are disabled; the RateLimit then reports NotEnforced")
		updateGateway(func(gw *operatorv1alpha1.APIGateway) { gw.Spec.RateLimits = nil })
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: globallimit.ServiceName}, d)
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the service's Deployment is removed")
			l := &gatewayv1alpha1.RateLimit{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(limit), l)).To(Succeed())
			ready := apimeta.FindStatusCondition(l.Status.Conditions, gatewayv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(gatewayv1alpha1.ReasonNotEnforced))
		}, timeout, interval).Should(Succeed())
		redis.Stop()
	})
}

// savePodLogs writes the logs of the pods of namespace matching selector to
// e2e/_artifacts/<prefix>-<pod>.log, for a failed spec's reader.
func savePodLogs(ctx context.Context, namespace, selector, prefix string) {
	pods, err := clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		GinkgoWriter.Printf("logs of %s/%s: %v\n", namespace, selector, err)
		return
	}
	for _, pod := range pods.Items {
		for _, c := range pod.Spec.Containers {
			logs, err := clientset.CoreV1().Pods(namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				logs = []byte(err.Error())
			}
			name := filepath.Join(artifacts, fmt.Sprintf("%s-%s-%s.log", prefix, pod.Name, c.Name))
			_ = os.WriteFile(name, logs, 0o644)
		}
	}
}
