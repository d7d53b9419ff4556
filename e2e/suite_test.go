//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"iter"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	k8snetworkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

const (
	namespace   = "portico-system"
	clusterName = "portico-e2e"
	// nodeClusterName is the cluster of the node target (hack/node.sh).
	nodeClusterName = "portico-e2e-node"
	release         = "portico"
	// The images of the kind target; imageTagNext is the same image under
	// another tag, for the rollout spec. The node target pulls releases
	// from its registry (release_test.go).
	imageRegistry = "e2e.local/portico"
	imageTag      = "e2e"
	imageTagNext  = "e2e-next"
	// progressDeadline is short on the local target so a stuck rollout is
	// reported within the suite's time.
	progressDeadline = "10s"
)

// controllerImages are the contract's controllers, by image (and
// Deployment) name.
var controllerImages = func() []string {
	var names []string
	for _, c := range contract.Controllers {
		names = append(names, c.Binary())
	}
	return names
}()

// runningControllers are the controllers that run with the APIGateway's
// defaults: all but the rate-limit service, which runs only while
// spec.rateLimits.global is set (globalratelimit_test.go).
var runningControllers = slices.DeleteFunc(slices.Clone(controllerImages), func(name string) bool {
	return name == contract.RateLimitService.Binary()
})

// runsByDefault tells the status entries of the controllers that run with
// the APIGateway's defaults (runningControllers) from the rate-limit
// service's, which is Disabled (NotConfigured) until global limits are set.
func runsByDefault(c operatorv1alpha1.ControllerStatus) bool {
	return c.Name != operatorv1alpha1.ControllerRateLimitService
}

// filterStatus yields the status entries of the controllers that run by
// default.
func filterStatus(controllers []operatorv1alpha1.ControllerStatus) iter.Seq[operatorv1alpha1.ControllerStatus] {
	return func(yield func(operatorv1alpha1.ControllerStatus) bool) {
		for _, c := range controllers {
			if runsByDefault(c) && !yield(c) {
				return
			}
		}
	}
}

var (
	target     framework.Target
	root       string
	artifacts  string
	kubeconfig string
	testbin    string
	k8sClient  client.WithWatch
	clientset  kubernetes.Interface
	restConfig *rest.Config
	hostlet    *framework.Hostlet
	// agentRef is the e2e agent's image and agentPullPolicy how pods get
	// it: imported into kind's nodes, pulled from the node target's
	// registry.
	agentRef        = imageRegistry + "/e2e-agent:" + imageTag
	agentPullPolicy = corev1.PullNever
	// nextAPIRuleImage is another apirule-controller image than the
	// default one, for the rollout spec.
	nextAPIRuleImage = imageRegistry + "/apirule-controller:" + imageTagNext
	operator         *framework.Process
	// olmBuild builds OLM (hack/testbin.sh --olm) beside the node
	// target's first specs.
	olmBuild  *framework.Process
	stopSuite context.CancelFunc
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Portico e2e")
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	target, err = framework.TargetFromEnv()
	Expect(err).NotTo(HaveOccurred())
	root = testenv.RepoRoot()
	artifacts = filepath.Join(root, "e2e", "_artifacts")
	Expect(os.RemoveAll(artifacts)).To(Succeed())
	Expect(os.MkdirAll(artifacts, 0o755)).To(Succeed())
	out, err := framework.Run(ctx, root, "hack/testbin.sh")
	Expect(err).NotTo(HaveOccurred())
	testbin = framework.LastLine(out)

	switch target {
	case framework.TargetLocal:
		setUpLocal(ctx)
	case framework.TargetKind:
		setUpKind(ctx)
	case framework.TargetNode:
		setUpNode(ctx)
	}
}, NodeTimeout(15*time.Minute))

// setUpNode starts a control plane with one real node (hack/node.sh:
// kubelet, containerd, kube-proxy) and its OCI registry, publishes two
// releases from the tree to that registry (package publish, as
// `make release` does) and installs the first with `helm install oci://…`
// after verifying its signatures: the operator and the controllers run as
// real pods pulled by digest from the registry, with their own
// ServiceAccount tokens, in a namespace that enforces the restricted Pod
// Security Standard.
func setUpNode(ctx context.Context) {
	By("starting a control plane with a real node (kubelet, containerd, kube-proxy) and its registry")
	_, _ = framework.Run(ctx, root, "hack/node.sh", "down", nodeClusterName)
	started := time.Now()
	out, err := framework.Run(ctx, root, "hack/node.sh", "up", nodeClusterName)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = framework.LastLine(out)
	fmt.Fprintf(GinkgoWriter, "node up in %s\n", time.Since(started).Round(100*time.Millisecond))
	connect()
	// istiod, which the setup starts last (istiod_test.go), builds beside
	// the releases' builds: a link only once test/istio compiled Istio.
	startIstiodBuild()

	publishReleases(ctx)
	// OLM's build (minutes of CPU) runs beside the install and the first
	// specs, which mostly wait for rollouts, not beside the releases'
	// builds; the OLM specs' own `testbin.sh --olm` waits for it (a lock)
	// and then finds it built.
	olmBuild, err = framework.StartProcess(filepath.Join(root, "hack", "testbin.sh"), []string{"--olm"}, nil,
		filepath.Join(artifacts, "olm-build.log"))
	Expect(err).NotTo(HaveOccurred())
	// Traefik, the Gateway API specs' gateway, likewise: built long before
	// those specs run.
	startTraefikBuild()
	// oauth2-proxy, the login story's authorizer (extauth_test.go), too.
	startOAuth2ProxyBuild()
	// OLM v1 (olmv1_test.go), too, when its story runs (last).
	if olmV1Enabled() {
		startOLMv1Build()
	}
	agentPullPolicy = corev1.PullIfNotPresent
	nextAPIRuleImage = releaseImage(releaseV2, "apirule-controller")

	By("creating " + namespace + " with the restricted Pod Security Standard enforced")
	Expect(k8sClient.Create(ctx, restrictedNamespace(namespace))).To(Succeed())
	installRelease(ctx, releaseV1)
	startPrometheus(ctx)
	startIstiod(ctx)
}

// restrictedNamespace is a namespace whose pods must meet the restricted
// Pod Security Standard (enforced by the API server's PodSecurity admission).
func restrictedNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
}

// setUpLocal starts a fresh kwok cluster, installs the chart with the
// operator scaled to zero, and runs the operator and the hostlet as host
// processes impersonating the chart's ServiceAccounts.
func setUpLocal(ctx context.Context) {
	By("starting a local control plane with kwok nodes")
	_, _ = framework.Run(ctx, root, "hack/cluster.sh", "down", clusterName)
	out, err := framework.Run(ctx, root, "hack/cluster.sh", "up", clusterName)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = framework.LastLine(out)
	connect()

	By("installing the chart with the operator Deployment scaled to zero")
	_, err = framework.Run(ctx, root, filepath.Join(testbin, "helm"), "upgrade", "--install", release, "charts/portico",
		"--kubeconfig", kubeconfig, "--namespace", namespace, "--create-namespace", "--set", "replicas=0", "--wait", "--timeout", "2m")
	Expect(err).NotTo(HaveOccurred())

	By("running the operator as a host process with the chart's ServiceAccount")
	operatorKubeconfig, err := framework.ImpersonatingKubeconfig(kubeconfig, artifacts, namespace, "portico-operator")
	Expect(err).NotTo(HaveOccurred())
	operator, err = framework.StartProcess(filepath.Join(root, "bin", "portico-operator"), []string{
		"--kubeconfig=" + operatorKubeconfig, "--namespace=" + namespace, "--leader-elect",
		"--controller-image-registry=e2e.local/portico", "--controller-image-tag=e2e",
		"--controller-progress-deadline=" + progressDeadline,
		"--metrics-bind-address=" + freeAddr(), "--health-probe-bind-address=" + freeAddr(),
	}, []string{"POD_NAMESPACE=" + namespace}, filepath.Join(artifacts, "portico-operator.log"))
	Expect(err).NotTo(HaveOccurred())

	By("running controller Deployments as host processes (the hostlet)")
	hostlet = &framework.Hostlet{AdminKubeconfig: kubeconfig, BinDir: filepath.Join(root, "bin"), Namespace: namespace, WorkDir: artifacts}
	hostCtx, cancel := context.WithCancel(context.Background())
	stopSuite = cancel
	go func() {
		defer GinkgoRecover()
		Expect(hostlet.Start(hostCtx, restConfig)).To(Succeed())
	}()
}

// setUpKind creates a kind cluster, builds and loads every image and
// installs the chart: the same specs then run against real pods. It needs
// Docker and kind on the PATH.
func setUpKind(ctx context.Context) {
	By("creating a kind cluster")
	_, _ = framework.Run(ctx, root, "kind", "delete", "cluster", "--name", clusterName)
	_, err := framework.Run(ctx, root, "kind", "create", "cluster", "--name", clusterName, "--wait", "2m")
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(artifacts, "kind.kubeconfig")
	out, err := framework.Run(ctx, root, "kind", "get", "kubeconfig", "--name", clusterName)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(kubeconfig, []byte(out), 0o600)).To(Succeed())
	connect()

	By("building and loading every image")
	const registry, tag = imageRegistry, imageTag
	imageDir := filepath.Join(artifacts, "images")
	agentRef = registry + "/e2e-agent:" + tag
	nextAPIRuleImage = registry + "/apirule-controller:" + imageTagNext
	_, err = framework.Run(ctx, root, releaseTool(ctx, "images"), "--registry", registry, "--tag", tag+","+imageTagNext,
		"--output", imageDir, "portico-operator", "apirule-controller", "ratelimit-controller", "gateway-controller", "e2e-agent")
	Expect(err).NotTo(HaveOccurred())
	archives, err := filepath.Glob(filepath.Join(imageDir, "*.tar"))
	Expect(err).NotTo(HaveOccurred())
	for _, archive := range archives {
		_, err = framework.Run(ctx, root, "kind", "load", "image-archive", "--name", clusterName, archive)
		Expect(err).NotTo(HaveOccurred())
	}

	By("installing the chart into a namespace that enforces the restricted Pod Security Standard")
	Expect(k8sClient.Create(ctx, restrictedNamespace(namespace))).To(Succeed())
	_, err = framework.Run(ctx, root, filepath.Join(testbin, "helm"), "upgrade", "--install", release, "charts/portico",
		"--kubeconfig", kubeconfig, "--namespace", namespace,
		"--set", "image.repository="+registry+"/portico-operator", "--set", "image.tag="+tag,
		"--set", "controllerImages.registry="+registry, "--set", "controllerImages.tag="+tag,
		"--wait", "--timeout", "3m")
	Expect(err).NotTo(HaveOccurred())
}

func connect() {
	var err error
	restConfig, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	restConfig.QPS, restConfig.Burst = 100, 200
	k8sClient, err = client.NewWithWatch(restConfig, client.Options{Scheme: testenv.Scheme(
		eventsv1.AddToScheme, rbacv1.AddToScheme, policyv1.AddToScheme, admissionregistrationv1.AddToScheme, gatewayv1alpha1.AddToScheme,
		networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, securityv1.AddToScheme, k8snetworkingv1.AddToScheme, discoveryv1.AddToScheme,
		operatorsv1alpha1.AddToScheme, operatorsv1.AddToScheme,
		gatewayapiv1.Install, gatewayapiv1beta1.Install,
	)})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(restConfig)
	Expect(err).NotTo(HaveOccurred())
}

var _ = AfterSuite(func(ctx SpecContext) {
	if stopSuite != nil {
		stopSuite()
	}
	operator.Stop()
	olmBuild.Stop() // done unless the OLM specs did not run
	stopOLMv1()
	traefikBuild.Stop()
	oauth2ProxyBuild.Stop()
	istiodBuild.Stop()
	istiod.Stop()
	traefik.Stop() // stopped already unless a Gateway API spec failed
	prometheus.Stop()
	if os.Getenv("E2E_KEEP_CLUSTER") != "" {
		fmt.Fprintf(GinkgoWriter, "keeping the cluster: KUBECONFIG=%s\n", kubeconfig)
		return
	}
	switch target {
	case framework.TargetLocal:
		_, _ = framework.Run(ctx, root, "hack/cluster.sh", "down", clusterName)
	case framework.TargetNode:
		// Every process, mount, interface and iptables chain of the node.
		if _, err := framework.Run(ctx, root, "hack/node.sh", "down", nodeClusterName); err != nil {
			fmt.Fprintf(GinkgoWriter, "hack/node.sh down: %v\n", err)
		}
	case framework.TargetKind:
		_, _ = framework.Run(ctx, root, "kind", "delete", "cluster", "--name", clusterName)
	}
}, NodeTimeout(2*time.Minute))

// dumpOnFailure writes what a failing spec needs for diagnosis.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() || k8sClient == nil {
		return
	}
	ctx := context.Background()
	gw := &operatorv1alpha1.APIGateway{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: "default"}, gw); err == nil {
		fmt.Fprintf(GinkgoWriter, "APIGateway status: %+v\n", gw.Status)
	}
	if hostlet != nil {
		fmt.Fprintf(GinkgoWriter, "host processes: %s\n", strings.Join(hostlet.Running(), ", "))
	}
	if target.RealPods() {
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods); err == nil {
			for _, p := range pods.Items {
				fmt.Fprintf(GinkgoWriter, "pod %s/%s: %s %+v\n", p.Namespace, p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			}
		}
	}
	if target == framework.TargetNode {
		fmt.Fprintf(GinkgoWriter, "node logs (kubelet, containerd, kube-proxy) in ~/.cache/portico/node/%s\n", nodeClusterName)
	}
	fmt.Fprintf(GinkgoWriter, "logs in %s\n", artifacts)
})
