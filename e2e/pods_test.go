//go:build e2e

package e2e

import (
	"context"
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
	return &appsv1.Deployment{
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
	}
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
	err := k8sClient.Create(ctx, obj)
	Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "create %T %s: %v", obj, obj.GetName(), err)
}

// deployTrafficPath runs the orders backend (the pods of the orders
// Service) and a gateway for istio-system/public (the e2e agent's minimal
// VirtualService router, with a ServiceAccount that may read
// VirtualServices and Services), and returns the gateway Service's IP.
func deployTrafficPath(ctx context.Context) string {
	enforceRestricted(ctx, "shop")
	enforceRestricted(ctx, "istio-system")

	createOrExisting(ctx, agentDeployment("shop", "orders", map[string]string{"app": "orders"}, "default", "backend", "--name", "orders"))

	createOrExisting(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "public-gateway", Namespace: "istio-system"}})
	createOrExisting(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-gateway"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.istio.io"}, Resources: []string{"virtualservices"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
		},
	})
	createOrExisting(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e-gateway"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-e2e-gateway"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "public-gateway", Namespace: "istio-system"}},
	})
	gatewayLabels := map[string]string{"istio": "ingressgateway"}
	createOrExisting(ctx, agentDeployment("istio-system", "public-gateway", gatewayLabels, "public-gateway", "gateway", "--gateway", "istio-system/public"))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "public-gateway", Namespace: "istio-system"},
		Spec: corev1.ServiceSpec{Selector: gatewayLabels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
		}},
	}
	createOrExisting(ctx, svc)

	for _, key := range []client.ObjectKey{{Namespace: "shop", Name: "orders"}, {Namespace: "istio-system", Name: "public-gateway"}} {
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

// requestFromPod runs one client pod per named request (e2e-agent get ARGS:
// it retries until the answer is the expected one), waits until each
// succeeds, and returns what each printed, read through the kubelet's log
// endpoint.
func requestFromPod(ctx context.Context, requests map[string][]string) map[string]string {
	answers := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, args := range requests {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "client-" + name, Namespace: "shop"},
			Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{restricted("client", append([]string{"get"}, args...)...)},
			},
		}
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
	return answers
}
