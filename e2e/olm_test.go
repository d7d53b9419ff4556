//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/hack/release/olm"
	"github.com/portico-dev/portico/test/framework"
)

// csvName is the ClusterServiceVersion of a release (package bundle).
func csvName(version string) string { return olm.Package + ".v" + strings.TrimPrefix(version, "v") }

// publishCatalog publishes the OLM catalog of the bundles of versions (as
// `make catalog` does, from their release.json) on the opm image the suite
// built, and returns its digest reference.
func publishCatalog(ctx context.Context, opmImage, tag string, versions ...string) string {
	args := []string{"catalog", "--registry", registryRepo, "--tag", tag, "--opm-image", opmImage}
	for _, v := range versions {
		args = append(args, filepath.Join(artifacts, "release", v, "release.json"))
	}
	out, err := framework.Run(ctx, root, releaseTool(ctx, "release"), args...)
	Expect(err).NotTo(HaveOccurred())
	fields := strings.Fields(framework.LastLine(out))
	Expect(fields).To(HaveLen(2))
	return fields[1]
}

// olmOPMImage is the opm image the OLM v0 specs pushed: the base of every
// catalog image the suite publishes, OLM v1's too.
var olmOPMImage string

// objectUIDs records the UID of every user object and every Istio object
// the controllers wrote.
func objectUIDs(ctx context.Context) map[string]string {
	out := map[string]string{}
	for k, v := range objectVersions(ctx) {
		uid, _, _ := strings.Cut(v, "@")
		out[k] = uid
	}
	return out
}

// expectKept checks that every object of before is in after with the same
// UID: nothing was lost or recreated.
func expectKept(before, after map[string]string) {
	for k, uid := range before {
		Expect(after).To(HaveKeyWithValue(k, uid), "%s was lost or recreated", k)
	}
}

// csvPhase is the phase of a CSV of the Portico namespace ("" while it does
// not exist).
func csvPhase(g Gomega, ctx context.Context, name string) operatorsv1alpha1.ClusterServiceVersionPhase {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, csv)
	if apierrors.IsNotFound(err) {
		return ""
	}
	g.Expect(err).NotTo(HaveOccurred())
	return csv.Status.Phase
}

// expectRunning checks that the operator and both controllers run the
// release's images, which the release's CSV lists in relatedImages, and
// that the APIGateway is Ready on them.
func expectRunning(g Gomega, ctx context.Context, version string) {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: csvName(version)}, csv)).To(Succeed())
	related := map[string]string{}
	for _, ri := range csv.Spec.RelatedImages {
		related[ri.Name] = ri.Image
	}
	for _, image := range append([]string{"portico-operator"}, controllerImages...) {
		g.Expect(related).To(HaveKeyWithValue(image, releaseImage(version, image)), "the CSV's relatedImages pin %s", image)
	}
	g.Expect(deployment(g, "portico-operator").Spec.Template.Spec.Containers[0].Image).To(Equal(related["portico-operator"]))
	st := gatewayStatus(g)
	g.Expect(st.State).To(Equal(operatorv1alpha1.StateReady))
	for c := range filterStatus(st.Controllers) {
		image := related[string(c.Name)+"-controller"]
		g.Expect(c.Image).To(Equal(image), string(c.Name))
		g.Expect(c.ImageID).To(HaveSuffix("@"+digestOf(image)), "%s runs the bundle's image", c.Name)
		g.Expect(c.Phase).To(Equal(operatorv1alpha1.PhaseReady))
	}
}

// appendReport adds a line to e2e/_artifacts/olm-report.txt.
func appendReport(line string) {
	fmt.Fprintln(GinkgoWriter, line)
	f, err := os.OpenFile(filepath.Join(artifacts, "olm-report.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintln(f, line)
	Expect(f.Close()).To(Succeed())
}

// olmSpecs are the OLM users' story, run last in the Portico container,
// after `helm uninstall` left the CRDs and users' objects: OLM (built from
// Go modules) installs Portico from its catalog into the same namespace,
// the way OperatorHub users subscribe, then upgrades it through the
// channel when a new catalog lists the next release. gatewayIP is where
// the APIRule's route answers.
func olmSpecs(gatewayIP *string) {
	var (
		o             *OLM
		catalogSource *operatorsv1alpha1.CatalogSource
		uids          map[string]string
	)

	It("installs Portico with OLM from its catalog: the CSV succeeds, everything runs the bundle's images, the APIGateway goes Ready", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("OLM runs bundle-unpack Jobs and a catalog pod: the node target only")
		}
		uids = objectUIDs(ctx)
		Expect(uids).To(HaveKey(ContainSubstring("VirtualService shop/orders")))

		By("building OLM's images from Go modules and pushing them to " + registryRepo)
		out, err := framework.Run(ctx, root, "hack/testbin.sh", "--olm")
		Expect(err).NotTo(HaveOccurred())
		o, err = PushOLMImages(ctx, framework.LastLine(out), registryRepo+"/olm")
		Expect(err).NotTo(HaveOccurred())
		olmOPMImage = o.OPMImage

		By("installing OLM " + o.Version + " with its Helm chart")
		started := time.Now()
		Expect(o.Install(ctx, root, filepath.Join(testbin, "helm"), kubeconfig)).To(Succeed())
		Eventually(func(g Gomega) {
			csv := &operatorsv1alpha1.ClusterServiceVersion{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: "packageserver"}, csv)).To(Succeed())
			g.Expect(csv.Status.Phase).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded), "packageserver: %s", csv.Status.Message)
		}, 3*timeout, interval).Should(Succeed())
		appendReport(fmt.Sprintf("OLM %s installed (chart, then the package server's CSV Succeeded) in %s", o.Version, time.Since(started).Round(100*time.Millisecond)))

		By("publishing the catalog of " + releaseV1 + " and adding it as a CatalogSource")
		catalogSource = &operatorsv1alpha1.CatalogSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: OLMNamespace, Name: olm.Package},
			Spec: operatorsv1alpha1.CatalogSourceSpec{
				SourceType:  operatorsv1alpha1.SourceTypeGrpc,
				Image:       publishCatalog(ctx, o.OPMImage, "e2e-1", releaseV1),
				DisplayName: "Portico",
				Publisher:   "Portico e2e",
			},
		}
		Expect(k8sClient.Create(ctx, catalogSource)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(catalogSource), catalogSource)).To(Succeed())
			g.Expect(catalogSource.Status.GRPCConnectionState).NotTo(BeNil())
			g.Expect(catalogSource.Status.GRPCConnectionState.LastObservedState).To(Equal("READY"))
		}, 3*timeout, interval).Should(Succeed())

		By("subscribing to the stable channel in " + namespace + " (OwnNamespace OperatorGroup), with the APIGateway created first")
		Expect(k8sClient.Create(ctx, &operatorsv1.OperatorGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "portico"},
			Spec:       operatorsv1.OperatorGroupSpec{TargetNamespaces: []string{namespace}},
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: "default"}})).To(Succeed())
		started = time.Now()
		Expect(k8sClient.Create(ctx, &operatorsv1alpha1.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: olm.Package},
			Spec: &operatorsv1alpha1.SubscriptionSpec{
				Package:                olm.Package,
				Channel:                olm.Channel,
				CatalogSource:          catalogSource.Name,
				CatalogSourceNamespace: catalogSource.Namespace,
				InstallPlanApproval:    operatorsv1alpha1.ApprovalAutomatic,
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(csvPhase(g, ctx, csvName(releaseV1))).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded))
		}, 3*timeout, interval).Should(Succeed())
		csvTook := time.Since(started)
		Eventually(func(g Gomega) { expectRunning(g, ctx, releaseV1) }, 3*timeout, interval).Should(Succeed())
		readyTook := time.Since(started)
		appendReport(fmt.Sprintf("OLM install of %s: Subscription to CSV Succeeded %s, to APIGateway Ready on the bundle's images %s",
			csvName(releaseV1), csvTook.Round(100*time.Millisecond), readyTook.Round(100*time.Millisecond)))

		By("asking the package server what the catalog offers (kubectl get packagemanifest)")
		out, err = framework.Run(ctx, root, filepath.Join(testbin, "kubectl"), "--kubeconfig", kubeconfig, "-n", namespace,
			"get", "packagemanifest", olm.Package, "-o", "jsonpath={.status.defaultChannel} {.status.channels[0].currentCSV}")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(olm.Channel + " " + csvName(releaseV1)))

		// Every object helm's Portico left is still there (same UID); the
		// new ratelimit controller wrote its EnvoyFilter again (the old one
		// removed it when the APIGateway was deleted).
		after := objectUIDs(ctx)
		expectKept(uids, after)
		Expect(after).To(HaveKey(ContainSubstring("EnvoyFilter")))
		uids = after
	})

	It("upgrades through the channel when a new catalog lists the next release, keeping every route answering and every object", func(ctx SpecContext) {
		if target != framework.TargetNode {
			Skip("OLM runs bundle-unpack Jobs and a catalog pod: the node target only")
		}
		Expect(catalogSource).NotTo(BeNil(), "the OLM install spec ran")
		By("publishing the catalog of " + releaseV1 + " and " + releaseV2 + " and pointing the CatalogSource at it")
		image := publishCatalog(ctx, o.OPMImage, "e2e-2", releaseV1, releaseV2)
		traffic := startTraffic(ctx, "http://"+*gatewayIP+"/health", "orders.example.com")
		started := time.Now()
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(catalogSource), catalogSource)).To(Succeed())
		patch := client.MergeFrom(catalogSource.DeepCopy())
		catalogSource.Spec.Image = image
		Expect(k8sClient.Patch(ctx, catalogSource, patch)).To(Succeed())

		Eventually(func(g Gomega) {
			sub := &operatorsv1alpha1.Subscription{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: olm.Package}, sub)).To(Succeed())
			g.Expect(sub.Status.InstalledCSV).To(Equal(csvName(releaseV2)))
			g.Expect(csvPhase(g, ctx, csvName(releaseV2))).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded))
			g.Expect(csvPhase(g, ctx, csvName(releaseV1))).To(BeEmpty(), "OLM removes the replaced CSV")
		}, 3*timeout, interval).Should(Succeed())
		csvTook := time.Since(started)
		Eventually(func(g Gomega) { expectRunning(g, ctx, releaseV2) }, 3*timeout, interval).Should(Succeed())
		readyTook := time.Since(started)
		time.Sleep(time.Second)
		traffic.Stop()
		appendReport(fmt.Sprintf("OLM upgrade %s -> %s: catalog update to CSV Succeeded %s, to APIGateway Ready on the new images %s; requests: %d answered, %d failed (last error: %q)",
			csvName(releaseV1), csvName(releaseV2), csvTook.Round(100*time.Millisecond), readyTook.Round(100*time.Millisecond), traffic.ok, traffic.failed, traffic.lastError))

		Expect(objectUIDs(ctx)).To(Equal(uids), "no user or Istio object was lost or recreated")
		Expect(traffic.ok).To(BeNumerically(">", 10))
		Expect(traffic.failed).To(BeZero(), "requests failed during the OLM upgrade: %s", traffic.lastError)
	})
}
