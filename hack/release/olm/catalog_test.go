package olm

import (
	"context"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"

	"github.com/portico-dev/portico/hack/release/oci"
	"github.com/portico-dev/portico/test/testenv"
)

var epoch = time.Unix(1_700_000_000, 0).UTC()

// bundleFS is bundle/ with the CSV set to version (0.1.0 as checked in).
func bundleFS(t *testing.T, version string) fstest.MapFS {
	t.Helper()
	files := fstest.MapFS{}
	src := filepath.Join(testenv.RepoRoot(), "bundle")
	for _, sub := range []string{"manifests", "metadata"} {
		entries, err := os.ReadDir(filepath.Join(src, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(src, sub, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(e.Name(), ".clusterserviceversion.yaml") {
				data = []byte(strings.NewReplacer("name: portico.v0.1.0", "name: portico.v"+version, "\n  version: 0.1.0\n", "\n  version: "+version+"\n").Replace(string(data)))
			}
			files[sub+"/"+e.Name()] = &fstest.MapFile{Data: data}
		}
	}
	return files
}

func render(t *testing.T, version string) Rendered {
	t.Helper()
	r, err := RenderBundle("registry.example/portico-operator-bundle@sha256:"+strings.Repeat(version[:1], 64), bundleFS(t, version))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRenderBundle(t *testing.T) {
	g := NewWithT(t)
	r := render(t, "0.2.0")
	b := r.Bundle
	g.Expect(b.Schema).To(Equal("olm.bundle"))
	g.Expect(b.Name).To(Equal("portico.v0.2.0"))
	g.Expect(b.Package).To(Equal(Package))
	props, err := property.Parse(b.Properties)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(props.Packages).To(ConsistOf(property.Package{PackageName: Package, Version: "0.2.0"}))
	g.Expect(props.GVKs).To(ConsistOf(
		property.GVK{Group: "operator.portico.dev", Version: "v1alpha1", Kind: "APIGateway"},
		property.GVK{Group: "gateway.portico.dev", Version: "v1alpha1", Kind: "APIRule"},
		property.GVK{Group: "gateway.portico.dev", Version: "v1alpha1", Kind: "RateLimit"},
	))
	g.Expect(props.GVKsRequired).To(BeEmpty())
	g.Expect(props.CSVMetadatas).To(HaveLen(1))
	g.Expect(props.CSVMetadatas[0].InstallModes).NotTo(BeEmpty())
	// The bundle image first, then every image of the CSV's relatedImages
	// (the operator and each controller).
	g.Expect(b.RelatedImages[0]).To(Equal(declcfg.RelatedImage{Image: b.Image}))
	names := []string{}
	for _, ri := range b.RelatedImages[1:] {
		names = append(names, ri.Name)
	}
	g.Expect(names).To(ContainElements("apirule-controller", "ratelimit-controller", "gateway-controller"))
	g.Expect(r.Icon).NotTo(BeNil())
	g.Expect(r.Icon.MediaType).To(Equal("image/svg+xml"))
	g.Expect(string(r.Icon.Data)).To(HavePrefix("<svg"))
}

func TestRenderBundleRejects(t *testing.T) {
	cases := map[string]func(fstest.MapFS){
		"no annotations": func(f fstest.MapFS) { delete(f, "metadata/annotations.yaml") },
		"no CSV":         func(f fstest.MapFS) { delete(f, "manifests/portico.clusterserviceversion.yaml") },
		"two CSVs": func(f fstest.MapFS) {
			f["manifests/copy.clusterserviceversion.yaml"] = f["manifests/portico.clusterserviceversion.yaml"]
		},
		"another media type": func(f fstest.MapFS) {
			f["metadata/annotations.yaml"] = &fstest.MapFile{Data: []byte("annotations:\n  operators.operatorframework.io.bundle.package.v1: portico\n  operators.operatorframework.io.bundle.mediatype.v1: helm\n")}
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			files := bundleFS(t, "0.1.0")
			edit(files)
			if _, err := RenderBundle("registry.example/b@sha256:"+strings.Repeat("0", 64), files); err == nil {
				t.Error("RenderBundle accepted the broken bundle")
			}
		})
	}
}

// TestCatalog: the channel upgrades each version to the next in semver
// order whatever order the bundles come in, and the package shows the
// newest bundle's description and icon.
func TestCatalog(t *testing.T) {
	g := NewWithT(t)
	v1, v2, v10 := render(t, "0.1.0"), render(t, "0.2.0"), render(t, "0.10.0")
	cfg, err := Catalog(Package, Channel, []Rendered{v10, v1, v2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Packages).To(HaveLen(1))
	g.Expect(cfg.Packages[0].DefaultChannel).To(Equal(Channel))
	g.Expect(cfg.Packages[0].Description).To(ContainSubstring("Portico is an API-gateway module"))
	g.Expect(cfg.Packages[0].Icon).To(Equal(v10.Icon))
	g.Expect(cfg.Channels).To(HaveLen(1))
	g.Expect(cfg.Channels[0].Entries).To(Equal([]declcfg.ChannelEntry{
		{Name: "portico.v0.1.0"},
		{Name: "portico.v0.2.0", Replaces: "portico.v0.1.0"},
		{Name: "portico.v0.10.0", Replaces: "portico.v0.2.0"},
	}))
	g.Expect(cfg.Bundles).To(HaveLen(3))

	// The YAML opm serves reads back into the same, valid catalog.
	doc, err := WriteYAML(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	back, err := declcfg.LoadReader(strings.NewReader(string(doc)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ValidateCatalog(*back)).To(Succeed())
	g.Expect(back.Channels).To(Equal(cfg.Channels))
	g.Expect(back.Bundles).To(HaveLen(3))
}

func TestCatalogRejects(t *testing.T) {
	g := NewWithT(t)
	_, err := Catalog(Package, Channel, nil)
	g.Expect(err).To(MatchError(ContainSubstring("at least one bundle")))
	_, err = Catalog(Package, Channel, []Rendered{render(t, "0.1.0"), render(t, "0.1.0")})
	g.Expect(err).To(MatchError(ContainSubstring("same version")))
	_, err = Catalog("other", Channel, []Rendered{render(t, "0.1.0")})
	g.Expect(err).To(MatchError(ContainSubstring(`not "other"`)))
}

func TestValidateCatalogFindsABrokenGraph(t *testing.T) {
	g := NewWithT(t)
	cfg, err := Catalog(Package, Channel, []Rendered{render(t, "0.1.0"), render(t, "0.2.0")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ValidateCatalog(*cfg)).To(Succeed())
	broken := func(edit func(*declcfg.DeclarativeConfig)) error {
		c, err := Catalog(Package, Channel, []Rendered{render(t, "0.1.0"), render(t, "0.2.0")})
		g.Expect(err).NotTo(HaveOccurred())
		edit(c)
		return ValidateCatalog(*c)
	}
	// v0.2.0 no longer upgrades v0.1.0: two channel heads.
	g.Expect(broken(func(c *declcfg.DeclarativeConfig) { c.Channels[0].Entries[1].Replaces = "" })).
		To(MatchError(ContainSubstring("multiple channel heads")))
	// A bundle the channel does not list.
	g.Expect(broken(func(c *declcfg.DeclarativeConfig) { c.Bundles[0].Package = "other" })).NotTo(Succeed())
	// A default channel that does not exist.
	g.Expect(broken(func(c *declcfg.DeclarativeConfig) { c.Packages[0].DefaultChannel = "fast" })).NotTo(Succeed())
}

// TestPublishCatalog publishes a catalog of two bundle images to a
// registry and reads it back as OLM's registry pod would.
func TestPublishCatalog(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	repo := u.Host + "/portico"

	// The opm base: a stand-in /bin/opm is enough for what is checked here
	// (the e2e serves the catalog with the real opm).
	opmLayer, err := oci.Layer([]oci.Entry{{Path: "bin/opm", Data: []byte("opm"), Mode: 0o755}}, epoch)
	g.Expect(err).NotTo(HaveOccurred())
	base, err := oci.ImageOf(v1.Platform{OS: "linux", Architecture: "amd64"}, v1.Config{Env: []string{"PATH=/bin"}, User: "1001"}, epoch, v1.History{}, opmLayer)
	g.Expect(err).NotTo(HaveOccurred())
	baseRef := repo + "/opm:test"
	baseTag, err := name.ParseReference(baseRef)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(baseTag, base)).To(Succeed())

	var bundles []string
	for _, version := range []string{"0.1.0", "0.2.0"} {
		dir := t.TempDir()
		for p, f := range bundleFS(t, version) {
			g.Expect(os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, p), f.Data, 0o644)).To(Succeed())
		}
		img, err := BuildBundleImage(dir, "v"+version, epoch)
		g.Expect(err).NotTo(HaveOccurred())
		tag, err := name.ParseReference(repo + "/portico-operator-bundle:v" + version)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(remote.Write(tag, img)).To(Succeed())
		d, err := img.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		bundles = append(bundles, tag.Context().Digest(d.String()).String())
	}

	ref, cfg, err := PublishCatalog(ctx, CatalogOptions{
		Repository: repo + "/" + CatalogImageName, Tag: "test", Base: baseRef,
		Bundles: bundles, Channel: Channel, Epoch: epoch,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Bundles[1].Image).To(Equal(bundles[1]))
	g.Expect(cfg.Channels[0].Entries[1].Replaces).To(Equal("portico.v0.1.0"))

	img, err := remote.Image(ref)
	g.Expect(err).NotTo(HaveOccurred())
	cf, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.Config.Labels).To(HaveKeyWithValue(ConfigsLabel, ConfigsDir))
	g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/bin/opm"}))
	g.Expect(cf.Config.Cmd).To(Equal([]string{"serve", "/configs"}))
	g.Expect(cf.Config.User).To(Equal("1001"), "the base's config is kept")
	files, err := BundleFiles(img)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveKey("bin/opm"))
	configs, err := fs.Sub(files, "configs")
	g.Expect(err).NotTo(HaveOccurred())
	served, err := declcfg.LoadFS(ctx, configs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ValidateCatalog(*served)).To(Succeed())
	g.Expect(served.Bundles).To(HaveLen(2))

	// The same bundles and epoch give the same catalog image.
	again, _, err := PublishCatalog(ctx, CatalogOptions{
		Repository: repo + "/" + CatalogImageName, Tag: "again", Base: baseRef,
		Bundles: bundles, Channel: Channel, Epoch: epoch,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.DigestStr()).To(Equal(ref.DigestStr()))
}
