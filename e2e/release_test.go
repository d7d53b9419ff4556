//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/hack/release/publish"
	"github.com/portico-dev/portico/hack/release/sbom"
	"github.com/portico-dev/portico/hack/release/signing"
	"github.com/portico-dev/portico/test/framework"
)

// The node target installs Portico as users do: from releases published
// to a real registry (distribution's, beside the node) by `make release`'s
// code, verified, then `helm install oci://…`. Two versions are released
// from the tree so the suite can upgrade and roll back.
const (
	releaseV1 = "v0.0.1-e2e"
	releaseV2 = "v0.0.2-e2e"
	// signingPassword encrypts the suite's throwaway cosign key.
	signingPassword = "portico-e2e"
)

var (
	// registryRepo is <registry host:port>/portico on the node target.
	registryRepo string
	// releases by version, as release.json describes them.
	releases = map[string]*publish.Record{}
	// publicKey verifies the releases' signatures.
	publicKey string
	// releaseTimes records how long each release took, for the report.
	releaseTimes = map[string]time.Duration{}
)

// publishReleases pushes the e2e agent image and releases releaseV1 twice
// (the second time under another output, to compare digests) and releaseV2,
// all signed with a fresh key.
func publishReleases(ctx context.Context) {
	out, err := framework.Run(ctx, root, "hack/node.sh", "registry", nodeClusterName)
	Expect(err).NotTo(HaveOccurred())
	registryRepo = framework.LastLine(out) + "/portico"

	By("pushing the e2e agent image to the registry " + registryRepo)
	out, err = framework.Run(ctx, root, releaseTool(ctx, "release"), "test-images", "--registry", registryRepo, "--tag", "e2e", "e2e-agent")
	Expect(err).NotTo(HaveOccurred())
	fields := strings.Fields(framework.LastLine(out))
	Expect(fields).To(HaveLen(2))
	agentRef = fields[1]

	By("creating a cosign key pair")
	keys := filepath.Join(artifacts, "keys")
	Expect(os.MkdirAll(keys, 0o700)).To(Succeed())
	var privateKey string
	privateKey, publicKey, err = signing.GenerateKeyPair(keys, []byte(signingPassword))
	Expect(err).NotTo(HaveOccurred())

	for _, v := range []string{releaseV1, releaseV2} {
		By("publishing release " + v + " (make release) to " + registryRepo)
		releases[v] = publishRelease(ctx, v, filepath.Join(artifacts, "release", v), privateKey)
	}
}

// publish runs the release command as `make release` does.
func publishRelease(ctx context.Context, version, output, privateKey string) *publish.Record {
	started := time.Now()
	cmd := exec.CommandContext(ctx, releaseTool(ctx, "release"), "--version", version, "--registry", registryRepo,
		"--platforms", "linux/amd64,linux/arm64", "--output", output, "--sign-key", privateKey)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+signingPassword)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "release %s: %s", version, out)
	releaseTimes[output] = time.Since(started)
	fmt.Fprintf(GinkgoWriter, "release %s published in %s\n", version, releaseTimes[output].Round(time.Second))
	m, err := publish.ReadRecord(filepath.Join(output, "release.json"))
	Expect(err).NotTo(HaveOccurred())
	return m
}

// releaseImage is the digest reference of an image of a release.
func releaseImage(version, image string) string {
	a, ok := releases[version].Artifact(image)
	Expect(ok).To(BeTrue(), "release %s has %s", version, image)
	return a.Reference
}

// digestsOf lists every artifact's digest reference of a release.
func digestsOf(m *publish.Record) []name.Digest {
	var out []name.Digest
	for _, a := range m.Artifacts {
		d, err := name.NewDigest(a.Reference)
		Expect(err).NotTo(HaveOccurred())
		out = append(out, d)
	}
	return out
}

// installRelease verifies every signature of a release, then installs its
// chart from the registry.
func installRelease(ctx context.Context, version string) {
	By("verifying the signature of every artifact of " + version)
	Expect(signing.Verify(ctx, publicKey, digestsOf(releases[version]), remote.WithContext(ctx))).To(Succeed())

	By("installing the chart oci://" + registryRepo + "/charts/portico --version " + version)
	started := time.Now()
	_, err := framework.Run(ctx, root, filepath.Join(testbin, "helm"), "install", release, "oci://"+registryRepo+"/charts/portico",
		"--version", version, "--plain-http", "--kubeconfig", kubeconfig, "--namespace", namespace,
		"--set", "controllers.gateway.secretNames={"+ownCertSecret+"}", // the default gateway's secretName spec
		"--set", "controllers.gateway.configMapNames={"+clientCAConfigMap+"}", // the default gateway's client CA bundle
		"--wait", "--timeout", "3m")
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(GinkgoWriter, "chart %s installed, operator pod Available in %s\n", version, time.Since(started).Round(100*time.Millisecond))
}

var _ = Describe("Releases", Ordered, func() {
	BeforeEach(func() {
		if target != framework.TargetNode {
			Skip("releases are published to the node target's registry")
		}
	})

	It("publishes multi-arch images with SBOM referrers, an OCI chart and a bundle, all signed", func(ctx SpecContext) {
		m := releases[releaseV1]
		Expect(m.Platforms).To(ConsistOf("linux/amd64", "linux/arm64"))
		kinds := map[string]int{}
		for _, a := range m.Artifacts {
			kinds[a.Kind]++
			ref, err := name.NewDigest(a.Reference)
			Expect(err).NotTo(HaveOccurred())
			desc, err := remote.Get(ref, remote.WithContext(ctx))
			Expect(err).NotTo(HaveOccurred(), a.Reference)
			switch a.Kind {
			case "image":
				idx, err := desc.ImageIndex()
				Expect(err).NotTo(HaveOccurred())
				im, err := idx.IndexManifest()
				Expect(err).NotTo(HaveOccurred())
				Expect(im.Manifests).To(HaveLen(2), a.Name)
				for _, p := range a.Platforms {
					sboms, err := sbom.Find(ctx, ref.Context().Digest(p.Digest), remote.WithContext(ctx))
					Expect(err).NotTo(HaveOccurred())
					Expect(sboms).To(HaveLen(1), "%s %s has one SBOM", a.Name, p.Platform)
					Expect(string(sboms[0])).To(ContainSubstring("pkg:golang/sigs.k8s.io/controller-runtime@"))
				}
			case "chart":
				Expect(string(desc.Manifest)).To(ContainSubstring("application/vnd.cncf.helm.config.v1+json"))
			case "bundle":
				img, err := desc.Image()
				Expect(err).NotTo(HaveOccurred())
				cfg, err := img.ConfigFile()
				Expect(err).NotTo(HaveOccurred())
				Expect(cfg.Config.Labels).To(HaveKeyWithValue("operators.operatorframework.io.bundle.mediatype.v1", "registry+v1"))
			}
		}
		Expect(kinds).To(Equal(map[string]int{"image": 1 + len(controllerImages), "chart": 1, "bundle": 1}))
		Expect(m.Signed).To(BeTrue())
		Expect(signing.Verify(ctx, publicKey, digestsOf(m), remote.WithContext(ctx))).To(Succeed())
		Expect(filepath.Join(artifacts, "release", releaseV1, "install.yaml")).To(BeAnExistingFile())
		Expect(filepath.Join(artifacts, "release", releaseV1, "NOTES.md")).To(BeAnExistingFile())
	})

	It("gives the same digests when the same tree is released again", func(ctx SpecContext) {
		again := publishRelease(ctx, releaseV1, filepath.Join(artifacts, "release", releaseV1+"-again"), "")
		first := releases[releaseV1]
		Expect(again.Artifacts).To(HaveLen(len(first.Artifacts)))
		for i, a := range again.Artifacts {
			Expect(a.Reference).To(Equal(first.Artifacts[i].Reference), a.Name)
			Expect(a.Platforms).To(Equal(first.Artifacts[i].Platforms), a.Name)
		}
	})
})

// trafficCounter sends requests through the APIRule's route (the gateway
// Service, Host orders.example.com, GET /health) until stopped, and counts
// answers and failures.
type trafficCounter struct {
	ok, failed int
	lastError  string
	stop       chan struct{}
	done       chan struct{}
}

func startTraffic(ctx context.Context, url, host string) *trafficCounter {
	// The loop's one request is explained too (explain_test.go): every
	// answer it gets must be that verdict's 200.
	expectExplained(ctx, "", []string{url, "--host", host})
	t := &trafficCounter{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(t.done)
		for {
			select {
			case <-t.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Host = host
			resp, err := client.Do(req)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "orders GET /health") {
					t.ok++
					continue
				}
				err = fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			t.failed++
			t.lastError = err.Error()
		}
	}()
	return t
}

func (t *trafficCounter) Stop() {
	close(t.stop)
	<-t.done
}

// objectVersions records the UID and resourceVersion of every user object
// and every Istio object the controllers wrote.
func objectVersions(ctx context.Context) map[string]string {
	out := map[string]string{}
	lists := []client.ObjectList{
		&gatewayv1alpha1.APIRuleList{}, &gatewayv1alpha1.RateLimitList{},
		&networkingv1.VirtualServiceList{}, &securityv1.AuthorizationPolicyList{}, &securityv1.RequestAuthenticationList{},
		&networkingv1alpha3.EnvoyFilterList{},
	}
	for _, list := range lists {
		Expect(k8sClient.List(ctx, list)).To(Succeed())
		Expect(meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			out[fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())] = string(obj.GetUID()) + "@" + obj.GetResourceVersion()
			return nil
		})).To(Succeed())
	}
	return out
}

// rollTo runs a helm command that changes the release's images (upgrade or
// rollback) while requests flow through the APIRule's route, and checks
// that the operator and every controller end on the version's digests,
// that the APIGateway went Progressing then Ready, that no user or Istio
// object was deleted or rewritten, and that no request failed.
func rollTo(ctx context.Context, version, gatewayIP string, helmArgs ...string) {
	operatorRef := releaseImage(version, "portico-operator")
	want := map[string]string{}
	for _, name := range runningControllers {
		want[name] = releaseImage(version, name)
	}
	before := objectVersions(ctx)
	Expect(before).To(HaveKey(ContainSubstring("VirtualService shop/orders")))
	Expect(before).To(HaveKey(ContainSubstring("EnvoyFilter")))

	var list operatorv1alpha1.APIGatewayList
	w, err := k8sClient.Watch(ctx, &list)
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	phases := map[operatorv1alpha1.ControllerName][]operatorv1alpha1.ControllerPhase{}
	record := func() {
		for {
			select {
			case ev := <-w.ResultChan():
				gw, ok := ev.Object.(*operatorv1alpha1.APIGateway)
				if !ok {
					continue
				}
				for c := range filterStatus(gw.Status.Controllers) {
					if c.Image != want[string(c.Name)+"-controller"] {
						continue
					}
					seen := phases[c.Name]
					if len(seen) == 0 || seen[len(seen)-1] != c.Phase {
						phases[c.Name] = append(seen, c.Phase)
					}
				}
			default:
				return
			}
		}
	}

	traffic := startTraffic(ctx, "http://"+gatewayIP+"/health", "orders.example.com")
	started := time.Now()
	_, err = framework.Run(ctx, root, filepath.Join(testbin, "helm"), append(helmArgs,
		"--kubeconfig", kubeconfig, "--namespace", namespace, "--wait", "--timeout", "3m")...)
	helmTook := time.Since(started)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		record()
		g.Expect(deployment(g, "portico-operator").Spec.Template.Spec.Containers[0].Image).To(Equal(operatorRef))
		st := gatewayStatus(g)
		g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
		for c := range filterStatus(st.Controllers) {
			g.Expect(c.Image).To(Equal(want[string(c.Name)+"-controller"]), string(c.Name))
			g.Expect(c.ImageID).To(HaveSuffix("@"+digestOf(want[string(c.Name)+"-controller"])), "%s runs the release's image", string(c.Name))
			g.Expect(c.Phase).To(Equal(operatorv1alpha1.PhaseReady))
		}
	}, 3*timeout, interval).Should(Succeed())
	readyTook := time.Since(started)
	By("reading the version each new pod logs at start (the binaries' stamped version)")
	images := map[string]string{"portico-operator": operatorRef}
	for k, v := range want {
		images[k] = v
	}
	for name, image := range images {
		Eventually(func(g Gomega) {
			found := 0
			for _, pod := range podsOf(ctx, name) {
				if pod.DeletionTimestamp != nil || pod.Spec.Containers[0].Image != image {
					continue
				}
				logs, err := clientset.CoreV1().Pods(namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name}).DoRaw(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(logs)).To(ContainSubstring(`"version":"`+version+`"`), "%s logs its version", pod.Name)
				found++
			}
			g.Expect(found).To(BeNumerically(">=", 1), "a running pod of %s with %s", name, image)
		}, timeout, interval).Should(Succeed())
	}
	// A few more requests once everything is Ready.
	time.Sleep(time.Second)
	traffic.Stop()

	report := fmt.Sprintf("roll to %s: helm %s took %s; every controller Ready on the new digests after %s; requests: %d answered, %d failed (last error: %q); phases %v",
		version, helmArgs[0], helmTook.Round(100*time.Millisecond), readyTook.Round(100*time.Millisecond), traffic.ok, traffic.failed, traffic.lastError, phases)
	fmt.Fprintln(GinkgoWriter, report)
	f, err := os.OpenFile(filepath.Join(artifacts, "upgrade-report.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintln(f, report)
	Expect(f.Close()).To(Succeed())

	// The watch may deliver the last status after the poll saw it.
	Eventually(func(g Gomega) {
		record()
		g.Expect(phases).To(HaveLen(len(runningControllers)), "every controller rolled: %v", phases)
		for _, seen := range phases {
			g.Expect(seen[len(seen)-1]).To(Equal(operatorv1alpha1.PhaseReady), "phases %v", phases)
		}
	}, timeout, interval).Should(Succeed())
	for name, seen := range phases {
		Expect(seen[0]).To(Equal(operatorv1alpha1.PhaseProgressing), "%s phases %v", name, seen)
		Expect(seen).NotTo(ContainElement(operatorv1alpha1.PhaseDegraded), "%s phases %v", name, seen)
	}
	Expect(traffic.ok).To(BeNumerically(">", 10))
	Expect(traffic.failed).To(BeZero(), "requests failed during the roll to %s: %s", version, traffic.lastError)
	Expect(objectVersions(ctx)).To(Equal(before), "no user or Istio object was deleted or rewritten")
}

func digestOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}
