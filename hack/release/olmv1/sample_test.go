package olmv1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/hack/release/bundle"
	"github.com/portico-dev/portico/hack/release/olm"
	"github.com/portico-dev/portico/internal/manifest"
)

// The fields of operator-controller v1.2.0's ClusterCatalog and
// ClusterExtension (olm.operatorframework.io/v1) the sample sets; strict
// decoding refuses any other.
type (
	metadata struct {
		Name string `json:"name"`
	}
	clusterCatalog struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   metadata `json:"metadata"`
		Spec       struct {
			Source struct {
				Type  string `json:"type"`
				Image struct {
					Ref string `json:"ref"`
				} `json:"image"`
			} `json:"source"`
		} `json:"spec"`
	}
	clusterExtension struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   metadata `json:"metadata"`
		Spec       struct {
			Namespace      string `json:"namespace"`
			ServiceAccount struct {
				Name string `json:"name"`
			} `json:"serviceAccount"`
			Source struct {
				SourceType string `json:"sourceType"`
				Catalog    struct {
					PackageName string   `json:"packageName"`
					Channels    []string `json:"channels"`
				} `json:"catalog"`
			} `json:"source"`
		} `json:"spec"`
	}
)

// config/olmv1/clusterextension.yaml installs the bundle's package from
// its channel, into the namespace and as the installer installer.yaml
// creates, from the catalog of the chart's release.
func TestClusterExtensionSample(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(root, "config", "olmv1", "clusterextension.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	docs, err := manifest.Documents(raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).To(HaveLen(2))

	var catalog clusterCatalog
	g.Expect(yaml.UnmarshalStrict(docs[0], &catalog)).To(Succeed())
	g.Expect(catalog.APIVersion).To(Equal("olm.operatorframework.io/v1"))
	g.Expect(catalog.Kind).To(Equal("ClusterCatalog"))
	g.Expect(catalog.Spec.Source.Type).To(Equal("Image"))
	chart, err := os.ReadFile(filepath.Join(root, "charts", "portico", "Chart.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	g.Expect(yaml.Unmarshal(chart, &meta)).To(Succeed())
	g.Expect(catalog.Spec.Source.Image.Ref).To(Equal(bundle.DefaultRegistry+"/"+olm.CatalogImageName+":"+meta.AppVersion),
		"the catalog `make catalog` publishes for the chart's release")

	var extension clusterExtension
	g.Expect(yaml.UnmarshalStrict(docs[1], &extension)).To(Succeed())
	g.Expect(extension.APIVersion).To(Equal("olm.operatorframework.io/v1"))
	g.Expect(extension.Kind).To(Equal("ClusterExtension"))
	g.Expect(extension.Metadata.Name).To(Equal(ExtensionName), "the installer's finalizers rule names it")
	g.Expect(extension.Spec.Namespace).To(Equal(namespace))
	g.Expect(extension.Spec.ServiceAccount.Name).To(Equal(InstallerName))
	g.Expect(extension.Spec.Source.SourceType).To(Equal("Catalog"))
	g.Expect(extension.Spec.Source.Catalog.PackageName).To(Equal(bundle.Package))
	g.Expect(extension.Spec.Source.Catalog.Channels).To(Equal([]string{bundle.DefaultChannel}))

	installer, err := os.ReadFile(installerFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(installer)).To(ContainSubstring("namespace: " + extension.Spec.Namespace))
	g.Expect(strings.Count(string(installer), "name: "+InstallerName)).To(BeNumerically(">=", 5))
}
