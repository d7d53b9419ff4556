// Command release publishes one Portico release to a registry (package
// hack/release/publish): multi-platform images with SBOM referrers, the OCI
// chart with every image pinned by digest, the OLM bundle image, cosign
// signatures (with --sign-key) and, in --output, release.json, install.yaml,
// NOTES.md and the chart archive.
//
//	bin/release-tools/release --version v1.2.3 --registry ghcr.io/portico-dev [--sign-key cosign.key]
//	bin/release-tools/release test-images --registry 127.0.0.1:5000/portico --tag e2e pause e2e-agent
//	bin/release-tools/release catalog --registry ghcr.io/portico-dev --tag v1.2.3 dist/v1.2.2/release.json dist/v1.2.3/release.json
//
// The key's password is COSIGN_PASSWORD, as for cosign. Timestamps are
// SOURCE_DATE_EPOCH, else the commit time of HEAD. test-images pushes the
// images only the tests use (host platform by default) and prints
// <name> <reference@digest> per image. catalog publishes the OLM catalog
// image (file-based catalog served by opm) listing the bundle images given,
// by digest or by their releases' release.json, one version after the other
// in the stable channel, and prints its reference@digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/portico-dev/portico/hack/release/olm"
	"github.com/portico-dev/portico/hack/release/publish"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "test-images":
		err = testImages(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "catalog":
		err = catalog(ctx, os.Args[2:])
	default:
		err = publishRelease(ctx, os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func publishRelease(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	o := publish.Options{Root: ".", Log: os.Stderr}
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "platforms of every image")
	fs.StringVar(&o.Version, "version", "", "release version, vX.Y.Z[-pre] (required)")
	fs.StringVar(&o.Registry, "registry", "ghcr.io/portico-dev", "registry and path the release is pushed to")
	fs.StringVar(&o.Output, "output", "", "directory for release.json, install.yaml, NOTES.md and the chart (default dist/<version>)")
	fs.StringVar(&o.SigningKey, "sign-key", "", "cosign private key file to sign every digest with (password: COSIGN_PASSWORD)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.Platforms, err = publish.ParsePlatforms(*platforms); err != nil {
		return err
	}
	if o.Output == "" {
		o.Output = "dist/" + o.Version
	}
	if err := os.MkdirAll(o.Output, 0o755); err != nil {
		return err
	}
	if o.Epoch, err = epoch(ctx); err != nil {
		return err
	}
	o.SigningPassword = []byte(os.Getenv("COSIGN_PASSWORD"))
	started := time.Now()
	m, err := publish.Run(ctx, o)
	if err != nil {
		return err
	}
	for _, a := range m.Artifacts {
		fmt.Printf("%-24s %-6s %s\n", a.Name, a.Kind, a.Reference)
	}
	fmt.Fprintf(os.Stderr, "release %s published to %s in %s (signed: %t); files in %s\n",
		m.Version, m.Registry, time.Since(started).Round(time.Second), m.Signed, o.Output)
	return nil
}

func testImages(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("test-images", flag.ContinueOnError)
	registry := fs.String("registry", "", "registry and path to push to (required)")
	tag := fs.String("tag", "e2e", "tag of every image")
	platforms := fs.String("platforms", "linux/"+runtime.GOARCH, "platforms of every image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" || fs.NArg() == 0 {
		return errors.New("usage: test-images --registry R [--tag T] IMAGE")
	}
	ps, err := publish.ParsePlatforms(*platforms)
	if err != nil {
		return err
	}
	refs, err := publish.PushTestImages(ctx, ".", *registry, *tag, ps, fs.Args(), os.Stderr)
	if err != nil {
		return err
	}
	for _, n := range fs.Args() {
		fmt.Printf("%s %s\n", n, refs[n])
	}
	return nil
}

func catalog(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	o := olm.CatalogOptions{Channel: olm.Channel}
	registry := fs.String("registry", "ghcr.io/portico-dev", "registry and path the catalog image is pushed to (as "+olm.CatalogImageName+")")
	fs.StringVar(&o.Tag, "tag", "latest", "tag of the catalog image")
	fs.StringVar(&o.Base, "opm-image", olm.DefaultOPMImage, "opm image the catalog is served by")
	fs.StringVar(&o.Channel, "channel", olm.Channel, "channel of the package")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: catalog --registry R [--tag T] [--opm-image I] BUNDLE_IMAGE@DIGEST|release.json [...]")
	}
	for _, arg := range fs.Args() {
		b := arg
		if strings.HasSuffix(arg, ".json") { // a release's release.json
			m, err := publish.ReadRecord(arg)
			if err != nil {
				return err
			}
			a, ok := m.Artifact(olm.BundleImage)
			if !ok {
				return fmt.Errorf("%s lists no %s", arg, olm.BundleImage)
			}
			b = a.Reference
		}
		if !strings.Contains(b, "@sha256:") {
			return fmt.Errorf("bundle image %s: name it by digest (release.json lists it)", b)
		}
		o.Bundles = append(o.Bundles, b)
	}
	o.Repository = *registry + "/" + olm.CatalogImageName
	var err error
	if o.Insecure, err = publish.PlainHTTP(*registry); err != nil {
		return err
	}
	if o.Epoch, err = epoch(ctx); err != nil {
		return err
	}
	ref, cfg, err := olm.PublishCatalog(ctx, o)
	if err != nil {
		return err
	}
	for _, e := range cfg.Channels[0].Entries {
		fmt.Fprintf(os.Stderr, "channel %s: %s (replaces %q)\n", o.Channel, e.Name, e.Replaces)
	}
	fmt.Printf("%s %s\n", olm.CatalogImageName, ref)
	return nil
}

// epoch is SOURCE_DATE_EPOCH, else the commit time of HEAD.
func epoch(ctx context.Context) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		out, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH unset and no commit time: %w", err)
		}
		s = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
