package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options say what Start installs and how its client talks.
type Options struct {
	// CRDs are installed beside the project's (config/crd/bases).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Istio, CertManager and GatewayAPI install the real CRDs of Istio, of
	// cert-manager and of the Gateway API's standard channel (IstioCRDs,
	// CertManagerCRDs, GatewayAPICRDs) too.
	Istio, CertManager, GatewayAPI bool
	// WithoutProjectCRDs leaves the project's CRDs out: only CRDs are
	// installed (and Istio's, cert-manager's).
	WithoutProjectCRDs bool
	// Scheme of the client; nil is client-go's (scheme.Scheme).
	Scheme *kruntime.Scheme
	// FieldValidation of the client's writes (metav1.FieldValidationStrict,
	// …); empty is the API server's default.
	FieldValidation string
	// Namespaces are created once the API server runs.
	Namespaces []string
}

// Env is a running envtest control plane (etcd and an API server); Stop
// stops it.
type Env struct {
	*envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client talks to it with the Options' scheme.
	Client client.Client
}

// Start starts an envtest control plane with the project's CRDs and those
// the Options name, creates the Options' namespaces, and returns it with a
// client of it. When it fails, it stops whatever it started.
func Start(o Options) (*Env, error) {
	env, err := Environment()
	if err != nil {
		return nil, err
	}
	if o.WithoutProjectCRDs {
		env.CRDDirectoryPaths = nil
	}
	if env.CRDs, err = extraCRDs(o); err != nil {
		return nil, err
	}
	e := &Env{Environment: env}
	if e.Config, err = env.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start envtest: %w", err), env.Stop())
	}
	if err := e.connect(o); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return e, nil
}

// connect makes the client and the namespaces.
func (e *Env) connect(o Options) error {
	var err error
	e.Client, err = client.New(e.Config, client.Options{Scheme: o.Scheme, FieldValidation: o.FieldValidation})
	if err != nil {
		return err
	}
	for _, ns := range o.Namespaces {
		// Unstructured, so that any scheme will do.
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := e.Client.Create(context.Background(), u); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// Main is the TestMain of a package whose tests share one environment: it
// starts it, hands it to use (which keeps its client, say), runs the tests,
// stops it and exits with the tests' code. It panics when the environment
// does not start.
func Main(m *testing.M, o Options, use func(*Env)) {
	env, err := Start(o)
	if err != nil {
		panic(err)
	}
	use(env)
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// extraCRDs are the CRDs the Options install beside the project's.
func extraCRDs(o Options) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds := append([]*apiextensionsv1.CustomResourceDefinition(nil), o.CRDs...)
	for _, extra := range []struct {
		want bool
		read func() ([]*apiextensionsv1.CustomResourceDefinition, error)
	}{{o.Istio, IstioCRDs}, {o.CertManager, CertManagerCRDs}, {o.GatewayAPI, GatewayAPICRDs}} {
		if !extra.want {
			continue
		}
		more, err := extra.read()
		if err != nil {
			return nil, err
		}
		crds = append(crds, more...)
	}
	return crds, nil
}

// Scheme is a scheme with the types of every AddToScheme function given,
// as runtime.SchemeBuilder registers them; it panics on an error, which
// only a programming mistake makes.
func Scheme(addToScheme ...func(*kruntime.Scheme) error) *kruntime.Scheme {
	s := kruntime.NewScheme()
	builder := kruntime.NewSchemeBuilder(addToScheme...)
	if err := builder.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Explain runs `kubectl explain field` (kubectl of AssetsDir) against the
// API server that kubeconfig reaches, with a discovery cache of its own,
// and returns its output.
func Explain(kubeconfig []byte, field string) (string, error) {
	assets, err := AssetsDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "portico-explain-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	config := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(config, kubeconfig, 0o600); err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", config, "--cache-dir", filepath.Join(dir, "cache"),
		"explain", field).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl explain %s: %w: %s", field, err, out)
	}
	return string(out), nil
}
