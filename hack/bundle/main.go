// Command bundle writes Portico's OLM bundle (registry+v1) from the same
// manifests a Helm user gets: it renders charts/portico with the Helm SDK
// (release portico in portico-system, images pointed at the bundle's
// version) and turns what the chart renders into
//
//   - bundle/manifests/portico.clusterserviceversion.yaml: the operator
//     Deployment as the install strategy, with a RELATED_IMAGE_* variable for
//     every controller image; the RBAC of the operator and of every
//     controller as clusterPermissions and permissions of their
//     ServiceAccounts; every image in relatedImages; the CRDs as owned CRDs;
//     config/samples as the alm-examples annotation;
//   - bundle/manifests/<group>_<plural>.yaml: the CRDs of config/crd/bases,
//     byte for byte;
//   - bundle/manifests/<name>_<group>_<version>_<kind>.yaml: the other objects
//     the chart renders that a bundle carries (the metrics Service);
//   - bundle/metadata/annotations.yaml and bundle.Dockerfile.
//
// bundle owns bundle/manifests, bundle/metadata and bundle.Dockerfile: it
// removes files there that it no longer produces. The output depends only
// on the chart, config/ and the flags (no timestamps), so running it twice
// changes nothing.
//
//	go run ./hack/bundle --version v1.2.3 --registry ghcr.io/portico-dev --output bundle
//
// --version is the operator's version as the images are tagged (a leading
// v is fine); the bundle's version is its semver without the v. A version
// that is not semver, such as `git describe` of an untagged commit, gives the
// bundle version 0.0.0-dev. Without --version, the chart's appVersion is
// used: the bundle checked in under bundle/ is generated that way.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.chartDir, "chart", "charts/portico", "Helm chart to render")
	flag.StringVar(&o.configDir, "config", "config", "directory with the controller-gen CRDs (crd/bases) and samples")
	flag.StringVar(&o.version, "version", "", "operator version, as the images are tagged (default: the chart's appVersion)")
	flag.StringVar(&o.registry, "registry", defaultRegistry, "registry of the operator and controller images")
	flag.StringVar(&o.imageTag, "image-tag", "", "tag of the operator and controller images (default: --version)")
	flag.StringVar(&o.namespace, "namespace", defaultNamespace, "namespace the chart is rendered for (the suggested install namespace)")
	channels := flag.String("channels", defaultChannel, "comma-separated channels of the bundle")
	flag.StringVar(&o.defaultChannel, "default-channel", defaultChannel, "default channel of the package")
	flag.Func("digest", "pin an image by digest, <image>=sha256:… (repeatable; a release pins every image)", func(v string) error {
		name, digest, ok := strings.Cut(v, "=")
		if !ok || name == "" || !strings.HasPrefix(digest, "sha256:") {
			return fmt.Errorf("want <image>=sha256:…, got %q", v)
		}
		if o.digests == nil {
			o.digests = map[string]string{}
		}
		o.digests[name] = digest
		return nil
	})
	output := flag.String("output", "bundle", "bundle directory to write (manifests/ and metadata/)")
	dockerfile := flag.String("dockerfile", "bundle.Dockerfile", "bundle Dockerfile to write; its directory is the build context")
	flag.Parse()
	o.channels = strings.Split(*channels, ",")

	err := func() error {
		rel, err := filepath.Rel(filepath.Dir(*dockerfile), *output)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("--output %s must be inside the directory of --dockerfile %s, the build context", *output, *dockerfile)
		}
		o.bundleDir = filepath.ToSlash(rel)
		b, err := generate(o)
		if err != nil {
			return err
		}
		for _, w := range b.warnings {
			fmt.Fprintln(os.Stderr, "bundle: warning:", w)
		}
		if err := write(*output, *dockerfile, b); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bundle: wrote %s (CSV portico.v%s) and %s\n", *output, b.version, *dockerfile)
		return nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}

// write writes the bundle into dir and the Dockerfile, removes files in the
// directories it owns that the bundle no longer has, and leaves files whose
// content did not change untouched.
func write(dir, dockerfile string, b *bundle) error {
	for _, sub := range ownedDirs {
		root := filepath.Join(dir, sub)
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			if _, ok := b.files[filepath.ToSlash(rel)]; !ok {
				return os.Remove(path)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	names := make([]string, 0, len(b.files))
	for name := range b.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := writeIfChanged(filepath.Join(dir, filepath.FromSlash(name)), b.files[name]); err != nil {
			return err
		}
	}
	return writeIfChanged(dockerfile, b.dockerfile)
}

func writeIfChanged(path string, content []byte) error {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, content, 0o644)
}
