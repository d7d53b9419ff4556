//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// Helpers for the targets with real pods (node, kind).

// agentImage is the e2e suite's own image (e2e/agent): backend, gateway and
// client in one static binary.
func agentImage() string { return agentRef }

// podsOf lists the pods of one of Portico's Deployments.
func podsOf(ctx context.Context, name string) []corev1.Pod {
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": name})).To(Succeed())
	return pods.Items
}

// podProbe asks every running pod of a controller Deployment for a probe
// path on the container's health port, through the API server's pod proxy
// (the API server reaches the pod's own IP), and returns the answers.
func podProbe(ctx context.Context, name, path string) func() []string {
	return func() []string {
		var answers []string
		for _, pod := range podsOf(ctx, name) {
			if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
				continue
			}
			port := ""
			for _, p := range pod.Spec.Containers[0].Ports {
				if p.Name == "health" {
					port = strconv.Itoa(int(p.ContainerPort))
				}
			}
			body, err := clientset.CoreV1().Pods(namespace).ProxyGet("http", pod.Name, port, path, nil).DoRaw(ctx)
			if err != nil {
				answers = append(answers, fmt.Sprintf("%s: %v", pod.Name, err))
				continue
			}
			answers = append(answers, strings.TrimSpace(string(body)))
		}
		return answers
	}
}

// restricted returns a container that meets the restricted Pod Security
// Standard, running the e2e agent with args.
func restricted(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           agentImage(),
		ImagePullPolicy: agentPullPolicy,
		Args:            args,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

func agentDeployment(namespace, name string, labels map[string]string, serviceAccount string, args ...string) *appsv1.Deployment {
	c := restricted("agent", args...)
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	// A backend on the node target is programmed by istiod (xdssidecars_test.go).
	return withXDSSidecar(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:            serviceAccount,
					AutomountServiceAccountToken:  ptr.To(serviceAccount != "default"),
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{c},
				},
			},
		},
	})
}

// enforceRestricted labels an existing namespace so the API server admits
// only pods that meet the restricted standard: the suite's own pods too.
func enforceRestricted(ctx context.Context, name string) {
	Eventually(func() error {
		ns := &corev1.Namespace{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		for k, v := range restrictedNamespace(name).Labels {
			ns.Labels[k] = v
		}
		return k8sClient.Update(ctx, ns)
	}, timeout, interval).Should(Succeed())
}

func createOrExisting(ctx context.Context, obj client.Object) {
	ensureSidecarIdentity(ctx, obj)
	err := k8sClient.Create(ctx, obj)
	Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "create %T %s: %v", obj, obj.GetName(), err)
}

// The gateway stand-in: one Deployment and Service in istio-system, the
// pods labelled istio: ingressgateway like Istio's ingress gateway, serving
// both the suite's Gateway istio-system/public and the default gateway
// istio-system/portico-gateway (gateway_test.go) when it exists, as one
// Istio ingress workload serves every Gateway that selects it.
const (
	gatewayStandIn   = "public-gateway"
	gatewayNamespace = operatorv1alpha1.DefaultGatewayNamespace
)

// deployTrafficPath runs the orders backend (the pods of the orders
// Service) and the gateway stand-in for istio-system/public and the default
// gateway (the e2e agent's minimal Gateway and VirtualService router, with
// a ServiceAccount that may read Gateways, VirtualServices, Services and,
// in istio-system only, the Secrets the Gateways' HTTPS servers name), and
// returns the gateway Service's IP: port 80 for the Gateways' HTTP
// servers, 443 for their HTTPS servers. It is idempotent.
func deployTrafficPath(ctx context.Context) string {
	enforceRestricted(ctx, "shop")
	enforceRestricted(ctx, gatewayNamespace)

	createOrExisting(ctx, agentDeployment("shop", "orders", map[string]string{"app": "orders"}, "default", "backend", "--name", "orders"))

	createOrExisting(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: gatewayStandIn, Namespace: gatewayNamespace}})
	createOrExisting(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-gateway"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.istio.io"}, Resources: []string{"virtualservices", "gateways"}, Verbs: []string{"get", "list"}},
			// Global rate limits (globalratelimit_test.go): the EnvoyFilters reaching its pods.
			{APIGroups: []string{"networking.istio.io"}, Resources: []string{"envoyfilters"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
		},
	})
	createOrExisting(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-gateway"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-e2e-gateway"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: gatewayStandIn, Namespace: gatewayNamespace}},
	})
	// Istio reads a Gateway's credentialName Secret (and its client CAs,
	// a Secret or ConfigMap) from its pods' namespace: the stand-in may
	// read Secrets and ConfigMaps there and nowhere else.
	createOrExisting(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-gateway-credentials", Namespace: gatewayNamespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}}},
	})
	createOrExisting(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-gateway-credentials", Namespace: gatewayNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "portico-e2e-gateway-credentials"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: gatewayStandIn, Namespace: gatewayNamespace}},
	})
	gatewayLabels := map[string]string{"istio": "ingressgateway"}
	// The Service below maps the Gateways' port 80 to the pods' 8080 and
	// 443 to 8443: istiod's listeners for them are on 8080 and 8443.
	standIn := asGatewayPods(withProxyIdentity(agentDeployment(gatewayNamespace, gatewayStandIn, gatewayLabels, gatewayStandIn,
		append([]string{"gateway"}, gatewayStandInArgs(gatewayXDSAddress(), gatewayLabels,
			gatewayNamespace+"/public", gatewayNamespace+"/"+operatorv1alpha1.DefaultGatewayName)...)...)), gatewayXDSAddress())
	c := &standIn.Spec.Template.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "https", ContainerPort: 8443})
	createOrExisting(ctx, standIn)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayStandIn, Namespace: gatewayNamespace},
		Spec: corev1.ServiceSpec{Selector: gatewayLabels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "https", Port: 443, TargetPort: intstr.FromString("https")},
		}},
	}
	createOrExisting(ctx, svc)

	for _, key := range []client.ObjectKey{{Namespace: "shop", Name: "orders"}, {Namespace: gatewayNamespace, Name: gatewayStandIn}} {
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, key, d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1), "%s is available", key)
		}, timeout, interval).Should(Succeed())
	}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
	return svc.Spec.ClusterIP
}

// runGatewayPods runs pods with the labels the Gateway istio-system/public
// selects, without the VirtualService router: on kwok, whose pods run no
// container, this is all a gateway workload can be.
func runGatewayPods(ctx context.Context) {
	labels := map[string]string{"istio": "ingressgateway"}
	createOrExisting(ctx, agentDeployment("istio-system", "public-gateway", labels, "default", "gateway"))
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "istio-system", Name: "public-gateway"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}, timeout, interval).Should(Succeed())
}

// clientPod is a pod of namespace shop running e2e-agent get args; with
// caConfigMap set, that ConfigMap of shop is mounted at /ca (so
// --ca /ca/ca.crt trusts its key ca.crt).
func clientPod(name, caConfigMap string, args ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-" + name, Namespace: "shop"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{restricted("client", append([]string{"get"}, args...)...)},
		},
	}
	if caConfigMap != "" {
		pod.Spec.Volumes = []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: caConfigMap}},
		}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ca", MountPath: "/ca", ReadOnly: true}}
	}
	return pod
}

// trustConfigMap writes ConfigMap shop/name whose key ca.crt is the
// concatenation of the PEM bundles, for clientPod to mount; it is deleted
// after the spec.
func trustConfigMap(ctx context.Context, name string, bundles ...[]byte) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Data: map[string]string{}}
	var all []byte
	for _, b := range bundles {
		all = append(all, b...)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			all = append(all, '\n')
		}
	}
	cm.Data["ca.crt"] = string(all)
	Expect(k8sClient.Create(ctx, cm)).To(Succeed(), "ConfigMap shop/%s", name)
	DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, cm) })
}

// requestFromPod runs one client pod per named request (e2e-agent get ARGS:
// it retries until the answer is the expected one), waits until each
// succeeds, and returns what each printed, read through the kubelet's log
// endpoint.
func requestFromPod(ctx context.Context, requests map[string][]string) map[string]string {
	return requestTrusting(ctx, "", requests)
}

// requestTrusting is requestFromPod with ConfigMap shop/caConfigMap (see
// trustConfigMap) mounted at /ca in every client pod, so the requests can
// pass --ca /ca/ca.crt.
func requestTrusting(ctx context.Context, caConfigMap string, requests map[string][]string) map[string]string {
	answers := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, args := range requests {
		pod := clientPod(name, caConfigMap, args...)
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, pod) })
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			phase := corev1.PodPhase("")
			Eventually(func() corev1.PodPhase {
				p := &corev1.Pod{}
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err == nil {
					phase = p.Status.Phase
				}
				return phase
			}, timeout, interval).Should(BeElementOf(corev1.PodSucceeded, corev1.PodFailed), pod.Name)
			logs, err := clientset.CoreV1().Pods("shop").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred(), "logs of %s", pod.Name)
			Expect(phase).To(Equal(corev1.PodSucceeded), "%s: %s", pod.Name, logs)
			mu.Lock()
			answers[name] = string(logs)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, args := range requests {
		expectExplained(ctx, caConfigMap, args)
	}
	return answers
}

// podTraffic is a client pod sending one request in a loop (e2e-agent get
// --loop) and tallying the answers; the tally is read from its log.
type podTraffic struct {
	pod *corev1.Pod
}

// trafficTally is the tally e2e-agent get --loop prints every second.
type trafficTally struct {
	OK     int               `json:"ok"`
	Failed int               `json:"failed"`
	Errors map[string]int    `json:"errors"`
	Last   map[string]string `json:"last"`
}

// Since is the tally of the requests after before (with the last message
// of each kind of failure among them).
func (t trafficTally) Since(before trafficTally) trafficTally {
	d := trafficTally{OK: t.OK - before.OK, Failed: t.Failed - before.Failed, Errors: map[string]int{}, Last: map[string]string{}}
	for k, n := range t.Errors {
		if n-before.Errors[k] > 0 {
			d.Errors[k] = n - before.Errors[k]
			d.Last[k] = t.Last[k]
		}
	}
	return d
}

// startTrafficFromPod runs a client pod that sends the request of args
// (e2e-agent get ARGS, with --loop added) until the spec ends, and waits
// until it has printed a first tally.
func startTrafficFromPod(ctx context.Context, name, caConfigMap string, args ...string) *podTraffic {
	pod := clientPod(name, caConfigMap, append(args, "--loop")...)
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { _ = k8sClient.Delete(ctx, pod) })
	t := &podTraffic{pod: pod}
	Eventually(func(g Gomega) { t.Tally(g) }, timeout, interval).Should(Succeed())
	// The loop's one request is explained too (explain_test.go): every
	// answer the tally counts as expected must be that verdict's.
	expectExplained(ctx, caConfigMap, args)
	return t
}

// Await waits until the pod has sent at least n requests after mark (a
// tally it printed before) and returns its tally since from. A loaded node
// sends fewer requests a second than a quiet one: what a spec needs is
// requests after an event, never a time after it.
func (t *podTraffic) Await(from, mark trafficTally, n int) trafficTally {
	var since trafficTally
	Eventually(func(g Gomega) {
		now := t.Tally(g)
		after := now.Since(mark)
		g.Expect(after.OK+after.Failed).To(BeNumerically(">=", n), "%s: requests sent after the mark", t.pod.Name)
		since = now.Since(from)
	}, timeout, interval).Should(Succeed())
	return since
}

// Tally returns the last tally the pod printed (at most a second old); for
// Eventually.
func (t *podTraffic) Tally(g Gomega) trafficTally {
	ctx := context.Background()
	p := &corev1.Pod{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t.pod), p)).To(Succeed())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "%s keeps sending requests", t.pod.Name)
	logs, err := clientset.CoreV1().Pods("shop").GetLogs(t.pod.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](20)}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(strings.TrimSpace(string(logs)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(lines[i], "traffic "); ok {
			var out trafficTally
			g.Expect(json.Unmarshal([]byte(rest), &out)).To(Succeed(), lines[i])
			return out
		}
	}
	g.Expect(string(logs)).To(ContainSubstring("traffic "), "%s printed no tally yet", t.pod.Name)
	return trafficTally{}
}
