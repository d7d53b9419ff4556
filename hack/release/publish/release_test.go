package publish

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/portico-dev/portico/hack/release/helmchart"
	"github.com/portico-dev/portico/hack/release/olm"
	"github.com/portico-dev/portico/internal/manifest"
	"github.com/portico-dev/portico/test/testenv"
)

var (
	root  = testenv.RepoRoot()
	epoch = time.Unix(1_700_000_000, 0).UTC()
)

func pinned() helmchart.Images {
	return helmchart.Images{Registry: "registry.example/portico", Version: "v1.2.3", Digests: map[string]string{
		OperatorImage:               "sha256:" + strings.Repeat("a", 64),
		"apirule-controller":        "sha256:" + strings.Repeat("b", 64),
		"ratelimit-controller":      "sha256:" + strings.Repeat("c", 64),
		"gateway-controller":        "sha256:" + strings.Repeat("d", 64),
		"portico-ratelimit-service": "sha256:" + strings.Repeat("e", 64),
	}}
}

func TestValidateVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v1.2.3": true, "v0.0.1-e2e": true, "v1.0.0-rc.1+build.5": true,
		"1.2.3": false, "v1.2": false, "vnext": false, "": false,
	} {
		if err := ValidateVersion(v); (err == nil) != ok {
			t.Errorf("ValidateVersion(%q) = %v, want ok=%t", v, err, ok)
		}
	}
}

func TestPackageChartPinsEveryImageByDigest(t *testing.T) {
	g := NewWithT(t)
	archive, chrt, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), pinned(), epoch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(chrt.Metadata.Version).To(Equal("v1.2.3"))
	g.Expect(chrt.Metadata.AppVersion).To(Equal("v1.2.3"))

	loaded, err := loader.LoadArchive(bytes.NewReader(archive))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded.Metadata.Version).To(Equal("v1.2.3"))
	image := loaded.Values["image"].(map[string]any)
	g.Expect(image["repository"]).To(Equal("registry.example/portico/portico-operator"))
	g.Expect(image["digest"]).To(Equal(pinned().Digests[OperatorImage]))
	controllers := loaded.Values["controllers"].(map[string]any)
	g.Expect(controllers["apirule"].(map[string]any)["image"]).To(Equal("registry.example/portico/apirule-controller@" + pinned().Digests["apirule-controller"]))
	g.Expect(controllers["ratelimit"].(map[string]any)["image"]).To(Equal("registry.example/portico/ratelimit-controller@" + pinned().Digests["ratelimit-controller"]))
	g.Expect(controllers["ratelimitservice"].(map[string]any)["image"]).To(Equal("registry.example/portico/portico-ratelimit-service@" + pinned().Digests["portico-ratelimit-service"]))
	gateway := controllers["gateway"].(map[string]any)
	g.Expect(gateway["image"]).To(Equal("registry.example/portico/gateway-controller@" + pinned().Digests["gateway-controller"]))
	g.Expect(gateway).To(HaveKeyWithValue("secretNames", BeEmpty()), "pinning the image keeps the controller's other values")

	var values []byte
	for _, f := range loaded.Raw {
		if f.Name == "values.yaml" {
			values = f.Data
		}
	}
	g.Expect(string(values)).To(ContainSubstring("# digest (sha256:...) pins the image"), "values.yaml keeps its comments")

	again, _, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), pinned(), epoch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(archive), "the same inputs give the same archive")
	later, _, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), pinned(), epoch.Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(later).NotTo(Equal(archive), "the epoch is the archive's only timestamp")
}

func TestPackageChartRefusesAnImageWithoutDigest(t *testing.T) {
	images := pinned()
	delete(images.Digests, "ratelimit-controller")
	_, _, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), images, epoch)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("controllers.ratelimit.image: no digest")))
}

func TestPackageChartRefusesAVersionHelmRejects(t *testing.T) {
	images := pinned()
	images.Version = "not a version"
	_, _, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), images, epoch)
	NewWithT(t).Expect(err).To(HaveOccurred())
}

func TestRenderInstall(t *testing.T) {
	g := NewWithT(t)
	_, chrt, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), pinned(), epoch)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := helmchart.RenderInstall(chrt, InstallNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	docs, err := manifest.Documents(out)
	g.Expect(err).NotTo(HaveOccurred())
	objects, err := manifest.Objects(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objects).To(HaveLen(len(docs)), "every document is an object")
	var kinds []string
	for _, obj := range objects {
		g.Expect(obj.GetKind()).NotTo(BeEmpty(), "%v", obj)
		kinds = append(kinds, obj.GetKind())
	}
	g.Expect(kinds[0]).To(Equal("Namespace"))
	g.Expect(kinds[1:4]).To(HaveEach(Equal("CustomResourceDefinition")), "CRDs come before what uses them")
	g.Expect(kinds).To(ContainElements("Deployment", "ServiceAccount", "ClusterRole"))
	g.Expect(string(out)).To(ContainSubstring("pod-security.kubernetes.io/enforce: restricted"))
	g.Expect(string(out)).To(ContainSubstring("image: registry.example/portico/portico-operator@" + pinned().Digests[OperatorImage]))
	g.Expect(string(out)).To(ContainSubstring("registry.example/portico/apirule-controller@"))
	g.Expect(string(out)).To(ContainSubstring("registry.example/portico/gateway-controller@" + pinned().Digests["gateway-controller"]))
}

func TestBuildBundleImage(t *testing.T) {
	g := NewWithT(t)
	img, err := olm.BuildBundleImage(filepath.Join(root, "bundle"), "v1.2.3", epoch)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Config.Labels).To(HaveKeyWithValue("operators.operatorframework.io.bundle.mediatype.v1", "registry+v1"))
	g.Expect(cfg.Config.Labels).To(HaveKeyWithValue("operators.operatorframework.io.bundle.manifests.v1", "manifests/"))
	g.Expect(cfg.Created.Time).To(Equal(epoch))
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(1))
	mt, err := img.MediaType()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mt).To(Equal(types.OCIManifestSchema1))

	again, err := olm.BuildBundleImage(filepath.Join(root, "bundle"), "v1.2.3", epoch)
	g.Expect(err).NotTo(HaveOccurred())
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	g.Expect(d2).To(Equal(d1))
}

// TestBuildAndPush builds the smallest image of the tree (pause) for two
// platforms twice, pushes it to an in-memory registry and pushes the chart
// with the Helm SDK.
func TestBuildAndPush(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := Builder{Root: root, Version: "v1.2.3", Epoch: epoch, WorkDir: t.TempDir()}
	platforms, err := ParsePlatforms("linux/amd64,linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	pause := TestImages()[0]
	idx, built, err := b.Build(ctx, pause, platforms)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(built).To(HaveLen(2))
	manifest, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(manifest.MediaType).To(Equal(types.OCIImageIndex))
	g.Expect(manifest.Manifests).To(HaveLen(2))
	g.Expect(manifest.Manifests[0].Platform.Architecture).To(Equal("amd64"))
	g.Expect(manifest.Manifests[1].Platform.Architecture).To(Equal("arm64"))
	cfg, err := built[1].Image.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Architecture).To(Equal("arm64"))
	g.Expect(cfg.Config.User).To(Equal("65532:65532"))
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/pause"}))

	b.WorkDir = t.TempDir()
	idx2, _, err := b.Build(ctx, pause, platforms)
	g.Expect(err).NotTo(HaveOccurred())
	d1, _ := idx.Digest()
	d2, _ := idx2.Digest()
	g.Expect(d2).To(Equal(d1), "the same tree and version give the same index")

	server := httptest.NewServer(registry.New())
	defer server.Close()
	u, err := url.Parse(server.URL)
	g.Expect(err).NotTo(HaveOccurred())
	repo := u.Host + "/portico"
	ref, err := PushIndex(ctx, repo+"/pause:v1.2.3", idx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref.DigestStr()).To(Equal(d1.String()))
	got, err := remote.Index(ref)
	g.Expect(err).NotTo(HaveOccurred())
	gotDigest, _ := got.Digest()
	g.Expect(gotDigest).To(Equal(d1))

	plain, err := PlainHTTP(repo)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain).To(BeTrue(), "a loopback registry is spoken to over HTTP")
	archive, _, err := helmchart.Package(filepath.Join(root, "charts", helmchart.Name), pinned(), epoch)
	g.Expect(err).NotTo(HaveOccurred())
	digest, err := helmchart.Push(archive, repo+"/charts/portico", "v1.2.3", epoch, plain)
	g.Expect(err).NotTo(HaveOccurred())
	chartRef, err := name.NewDigest(repo + "/charts/portico@" + digest)
	g.Expect(err).NotTo(HaveOccurred())
	desc, err := remote.Get(chartRef)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(desc.Manifest)).To(ContainSubstring("application/vnd.cncf.helm.config.v1+json"))
	g.Expect(string(desc.Manifest)).To(ContainSubstring(epoch.Format(time.RFC3339)), "the manifest's creation time is the epoch")
	again, err := helmchart.Push(archive, repo+"/charts/portico", "v1.2.3", epoch, plain)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(digest), "pushing the same chart again gives the same digest")
}

func TestNotes(t *testing.T) {
	m := &Record{Version: "v1.2.3", Registry: "ghcr.io/portico-dev", Platforms: []string{"linux/amd64", "linux/arm64"},
		Artifacts: []Artifact{{Name: "portico-operator", Kind: "image", Reference: "ghcr.io/portico-dev/portico-operator@sha256:" + strings.Repeat("a", 64)}}}
	g := NewWithT(t)
	notes := string(Notes(m, []Change{{Hash: "abc1234", Subject: "apirule: a fix"}}, "v1.2.2"))
	g.Expect(notes).To(ContainSubstring("helm install portico oci://ghcr.io/portico-dev/charts/portico --version v1.2.3"))
	g.Expect(notes).To(ContainSubstring("Since v1.2.2:"))
	g.Expect(notes).To(ContainSubstring("- apirule: a fix (abc1234)"))
	g.Expect(notes).To(ContainSubstring("`ghcr.io/portico-dev/portico-operator@sha256:"))
	first := string(Notes(m, nil, ""))
	g.Expect(first).To(ContainSubstring("First release"))
}

func TestParsePlatforms(t *testing.T) {
	g := NewWithT(t)
	ps, err := ParsePlatforms("linux/amd64, linux/arm64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(Equal([]v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}))
	_, err = ParsePlatforms("windows/amd64")
	g.Expect(err).To(HaveOccurred())
	_, err = ParsePlatforms("")
	g.Expect(err).To(HaveOccurred())
}
