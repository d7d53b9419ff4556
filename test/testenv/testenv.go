package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/manifest"
)

// RepoRoot is the repository's top directory: the first directory at or
// above the working directory (go test runs in the package's directory) whose
// go.mod declares Portico's module. The source location is only a fallback,
// since -trimpath (which make sets) makes it module-relative.
func RepoRoot() string {
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if raw, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.HasPrefix(raw, []byte("module github.com/portico-dev/portico\n")) {
				return d
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildController builds the binary of controllers/<name> into dir and
// returns its path (dir/<name>-controller).
func BuildController(ctx context.Context, dir, name string) (string, error) {
	binary := filepath.Join(dir, name+"-controller")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./controllers/"+name)
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./controllers/%s: %w\n%s", name, err, out)
	}
	return binary, nil
}

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// AssetsDir returns the directory with etcd, kube-apiserver and kubectl:
// $KUBEBUILDER_ASSETS when set, else what hack/testbin.sh prints (building
// the binaries from Go modules on first use).
func AssetsDir() (string, error) {
	assetsOnce.Do(func() {
		if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
			assetsDir = dir
			return
		}
		cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "testbin.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			assetsErr = fmt.Errorf("build control-plane binaries with hack/testbin.sh: %w", err)
			return
		}
		assetsDir = strings.TrimSpace(string(out))
	})
	return assetsDir, assetsErr
}

// Versions of the modules whose CRDs the tests install, used when the main
// module does not require them (yet).
var moduleVersions = map[string]string{
	"istio.io/api":            "v1.31.1",
	"sigs.k8s.io/gateway-api": "v1.6.3",
}

// ModuleDir returns the directory of a Go module in the module cache: the
// version the main module requires, else the pinned one, downloading it
// through the module proxy when needed.
func ModuleDir(module string) (string, error) {
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	list.Dir = RepoRoot()
	if out, err := list.Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		return strings.TrimSpace(string(out)), nil
	}
	version, ok := moduleVersions[module]
	if !ok {
		return "", fmt.Errorf("module %s is neither required by go.mod nor pinned in testenv", module)
	}
	download := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	download.Dir = RepoRoot()
	out, err := download.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory (%s)", module, version, info.Error)
	}
	return info.Dir, nil
}

// IstioCRDs returns the real Istio CRDs shipped in the istio.io/api module.
func IstioCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("istio.io/api")
	if err != nil {
		return nil, err
	}
	return ReadCRDs(filepath.Join(dir, "kubernetes", "customresourcedefinitions.gen.yaml"))
}

// CertManagerCRDs returns cert-manager's real Certificate, Issuer and
// ClusterIssuer CRDs, shipped in its Go module.
func CertManagerCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("github.com/cert-manager/cert-manager")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"certificates", "issuers", "clusterissuers"} {
		c, err := ReadCRDs(filepath.Join(dir, "deploy", "crds", "cert-manager.io_"+kind+".yaml"))
		if err != nil {
			return nil, err
		}
		crds = append(crds, c...)
	}
	return crds, nil
}

// GatewayAPICRDs returns the real Gateway API CRDs of the standard channel
// (Gateways, GatewayClasses, HTTPRoutes, ReferenceGrants: the kinds Portico
// reads or writes), shipped in the sigs.k8s.io/gateway-api module.
func GatewayAPICRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"gatewayclasses", "gateways", "httproutes", "referencegrants"} {
		c, err := ReadCRDs(filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_"+kind+".yaml"))
		if err != nil {
			return nil, err
		}
		crds = append(crds, c...)
	}
	return crds, nil
}

// GatewayAPIStandardCRDs returns every CRD of the Gateway API's standard
// channel in the sigs.k8s.io/gateway-api module: what a cluster has after
// the Gateway API's standard install, and what an implementation that
// watches every standard kind (Traefik) needs.
func GatewayAPIStandardCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		c, err := ReadCRDs(f)
		if err != nil {
			return nil, err
		}
		crds = append(crds, c...)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRD in %s", filepath.Join(dir, "config", "crd", "standard"))
	}
	return crds, nil
}

// ProjectCRDPaths are the CRDs generated into config/crd/bases.
func ProjectCRDPaths() []string {
	return []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
}

// ReadManifests decodes every non-empty object of a multi-document YAML
// file (package manifest reads it).
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	return manifest.ReadObjects(path)
}

// ReadCRDs parses every CustomResourceDefinition in a multi-document YAML file.
func ReadCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	objs, err := ReadManifests(path)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// FreeLoopbackAddr returns a 127.0.0.1 address with a port free right now.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
