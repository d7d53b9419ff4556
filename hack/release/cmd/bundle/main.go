// Command bundle writes Portico's OLM bundle (package hack/release/bundle)
// into --output (manifests/, metadata/) and its Dockerfile:
//
//	bin/release-tools/bundle --version v1.2.3 --registry ghcr.io/portico-dev --output bundle
//
// --olmv1-installer also writes the installer OLM v1 needs for the bundle
// (package hack/release/olmv1); make bundle writes
// config/olmv1/installer.yaml.
//
// --version is the operator's version as the images are tagged; without it,
// the chart's appVersion is used, as for the bundle checked in under bundle/.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/portico-dev/portico/hack/release/bundle"
	"github.com/portico-dev/portico/hack/release/olmv1"
	"github.com/portico-dev/portico/internal/manifest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}

func run() error {
	var o bundle.Options
	flag.StringVar(&o.ChartDir, "chart", "charts/portico", "Helm chart to render")
	flag.StringVar(&o.ConfigDir, "config", "config", "directory with the controller-gen CRDs (crd/bases) and samples")
	flag.StringVar(&o.Version, "version", "", "operator version, as the images are tagged (default: the chart's appVersion)")
	flag.StringVar(&o.Registry, "registry", bundle.DefaultRegistry, "registry of the operator and controller images")
	flag.StringVar(&o.ImageTag, "image-tag", "", "tag of the operator and controller images (default: --version)")
	flag.StringVar(&o.Namespace, "namespace", bundle.DefaultNamespace, "namespace the chart is rendered for (the suggested install namespace)")
	channels := flag.String("channels", bundle.DefaultChannel, "comma-separated channels of the bundle")
	flag.StringVar(&o.DefaultChannel, "default-channel", bundle.DefaultChannel, "default channel of the package")
	flag.Func("digest", "pin an image by digest, <image>=sha256:… (repeatable; a release pins every image)", func(v string) error {
		name, digest, ok := strings.Cut(v, "=")
		if !ok || name == "" || !strings.HasPrefix(digest, "sha256:") {
			return fmt.Errorf("want <image>=sha256:…, got %q", v)
		}
		if o.Digests == nil {
			o.Digests = map[string]string{}
		}
		o.Digests[name] = digest
		return nil
	})
	output := flag.String("output", "bundle", "bundle directory to write (manifests/ and metadata/)")
	dockerfile := flag.String("dockerfile", "bundle.Dockerfile", "bundle Dockerfile to write; its directory is the build context")
	installer := flag.String("olmv1-installer", "", "also write the OLM v1 installer (ServiceAccount and least RBAC) of the bundle to this file, e.g. config/olmv1/installer.yaml")
	flag.Parse()
	o.Channels = strings.Split(*channels, ",")

	var err error
	if o.BundleDir, err = bundle.ContextDir(*output, *dockerfile); err != nil {
		return err
	}
	b, err := bundle.Generate(o)
	if err != nil {
		return err
	}
	for _, w := range b.Warnings {
		fmt.Fprintln(os.Stderr, "bundle: warning:", w)
	}
	if err := b.Write(*output, *dockerfile); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bundle: wrote %s (CSV portico.v%s) and %s\n", *output, b.Version, *dockerfile)
	if *installer != "" {
		raw, err := olmv1.InstallerYAML(b.Files, o.Namespace, olmv1.ExtensionName)
		if err != nil {
			return fmt.Errorf("OLM v1 installer: %w", err)
		}
		if _, err := manifest.WriteFile(*installer, raw); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bundle: wrote %s\n", *installer)
	}
	return nil
}
