//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/portico-dev/portico/hack/release/oci"
	"github.com/portico-dev/portico/test/framework"
)

// OLM is Operator Lifecycle Manager (v0) as hack/testbin.sh --olm builds
// it from Go modules: Dir holds the binaries and OLM's own Helm chart.
type OLM struct {
	Dir string
	// Version is OLM's (the module version testbin.sh built).
	Version string
	// Image is OLM's image (olm, catalog and package-server operators, and
	// cpb and cp for the bundle-unpack Jobs); OPMImage is opm's (catalog
	// pods and the unpack Jobs' extract step), with grpc_health_probe.
	Image, OPMImage string
}

// olmUser is the user OLM's images run as, as upstream's.
const olmUser = "1001"

// PushOLMImages builds OLM's two images for the host's platform from the
// binaries in dir and pushes them below repository (a local registry):
// what quay.io/operator-framework/olm and .../opm hold, as OLM's chart
// and its Jobs and catalog pods run them.
func PushOLMImages(ctx context.Context, dir, repository string) (*OLM, error) {
	version := strings.TrimPrefix(filepath.Base(dir), "olm-")
	version, _, _ = strings.Cut(version, "-") // olm-<version>-<key>
	o := &OLM{Dir: dir, Version: version}
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	epoch := time.Unix(0, 0).UTC()
	for _, img := range []struct {
		name       string
		binaries   []string
		entrypoint string
		ref        *string
	}{
		{"olm", []string{"olm", "catalog", "package-server", "copy-content", "cpb", "cp"}, "/bin/olm", &o.Image},
		{"opm", []string{"opm", "grpc_health_probe"}, "/bin/opm", &o.OPMImage},
	} {
		entries := []oci.Entry{
			{Path: "bin", Dir: true, Mode: 0o755},
			// opm serve caches in /tmp; the images run as a non-root user.
			{Path: "tmp", Dir: true, Mode: 0o1777},
		}
		for _, b := range img.binaries {
			data, err := os.ReadFile(filepath.Join(dir, b))
			if err != nil {
				return nil, err
			}
			entries = append(entries, oci.Entry{Path: "bin/" + b, Data: data, Mode: 0o755})
		}
		layer, err := oci.Layer(entries, epoch)
		if err != nil {
			return nil, err
		}
		image, err := oci.ImageOf(platform, v1.Config{
			Entrypoint: []string{img.entrypoint},
			Env:        []string{"PATH=/bin"},
			User:       olmUser,
			WorkingDir: "/",
			Labels:     map[string]string{"org.opencontainers.image.version": version},
		}, epoch, v1.History{CreatedBy: "hack/testbin.sh --olm", Comment: strings.Join(img.binaries, " ")}, layer)
		if err != nil {
			return nil, err
		}
		tag, err := name.NewTag(repository+"/"+img.name+":"+version, name.Insecure)
		if err != nil {
			return nil, err
		}
		if err := remote.Write(tag, image, remote.WithContext(ctx)); err != nil {
			return nil, fmt.Errorf("push %s: %w", tag, err)
		}
		d, err := image.Digest()
		if err != nil {
			return nil, err
		}
		*img.ref = tag.Context().Digest(d.String()).String()
	}
	return o, nil
}

// OLM's namespaces as the suite installs it (upstream's defaults).
const (
	OLMNamespace       = "olm"
	OperatorsNamespace = "operators"
)

// Install installs OLM with its own Helm chart, as upstream's release
// manifests are rendered from it: the CRDs, the olm and catalog operators
// in OLMNamespace, the global OperatorGroup in OperatorsNamespace and the
// package server (OLM installs it from a CSV). No default catalog: the
// suite adds Portico's.
func (o *OLM) Install(ctx context.Context, root, helm, kubeconfig string) error {
	_, err := framework.Run(ctx, root, helm, "install", "olm", filepath.Join(o.Dir, "chart"),
		"--kubeconfig", kubeconfig, "--namespace", "default", "--wait", "--timeout", "5m",
		"--set", "namespace="+OLMNamespace,
		"--set", "catalog_namespace="+OLMNamespace,
		"--set", "operator_namespace="+OperatorsNamespace,
		"--set", "installType=portico-e2e", // not "upstream": no OperatorHub.io catalog
		"--set", "olm.image.ref="+o.Image, "--set", "olm.image.pullPolicy=IfNotPresent",
		"--set", "catalog.image.ref="+o.Image, "--set", "catalog.image.pullPolicy=IfNotPresent",
		"--set", "package.image.ref="+o.Image, "--set", "package.image.pullPolicy=IfNotPresent",
		"--set", "package.replicaCount=1",
		"--set", "catalog.commandArgs=--configmapServerImage="+o.OPMImage,
		"--set", "catalog.opmImageArgs=--opmImage="+o.OPMImage,
	)
	return err
}
