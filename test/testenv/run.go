package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RunInput says what environment Run starts for a package's tests and what
// the package does with it.
type RunInput struct {
	// Istio, CertManager and GatewayAPI install the real CRDs of Istio, of
	// cert-manager and of the Gateway API's standard channel (IstioCRDs,
	// CertManagerCRDs, GatewayAPICRDs) beside Portico's.
	Istio, CertManager, GatewayAPI bool
	// WithoutProjectCRDs leaves Portico's CRDs (config/crd/bases) out.
	WithoutProjectCRDs bool
	// CRDs, when set, returns more CRDs to install: read from a file of
	// the test's, or edited copies of the sets above.
	CRDs func() ([]*apiextensionsv1.CustomResourceDefinition, error)
	// AddToScheme adds the types of the API groups the tests use to the
	// client's scheme, beyond those Scheme always has.
	AddToScheme []func(*kruntime.Scheme) error
	// FieldValidation of the client's writes (metav1.FieldValidationStrict,
	// …); empty is the API server's default.
	FieldValidation string
	// Namespaces are created once the API server runs.
	Namespaces []string
	// Setup, when set, runs once the environment is up, before any test:
	// it keeps what the tests use (env.Client, env.Config, the Env itself)
	// and starts what they exercise (a manager, controller processes). ctx
	// is cancelled once the tests ran. An error fails the package.
	Setup func(ctx context.Context, env *Env) error
	// Teardown, when set, runs after the tests (or after Setup failed),
	// before the API server stops, with the package's exit code: it stops
	// what Setup started that ctx does not stop.
	Teardown func(code int)
}

// Env is a running envtest control plane (etcd and an API server), as Run
// hands it to RunInput.Setup. The embedded Environment gives its
// KubeConfig and AddUser.
type Env struct {
	*envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client talks to it with Scheme's types and RunInput.AddToScheme's.
	Client client.Client
	// Scheme is the client's.
	Scheme *kruntime.Scheme
}

// Run is the one way a test package starts envtest; its TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.RunInput{…})) }
//
// Run starts the control plane with the CRDs in, creates the namespaces,
// calls in.Setup, runs the tests, calls in.Teardown, stops the control
// plane and returns the exit code: 1 (with the reason on stderr) when the
// environment or Setup failed.
func Run(m *testing.M, in RunInput) int {
	env, err := start(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stop:", err)
		}
	}()
	code := 1
	if in.Teardown != nil {
		defer func() { in.Teardown(code) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before Teardown
	if in.Setup != nil {
		if err := in.Setup(ctx, env); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: setup:", err)
			return code
		}
	}
	code = m.Run()
	return code
}

// start starts a control plane as in says, with a client of it; when it
// fails, it stops whatever it started.
func start(in RunInput) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true}
	if !in.WithoutProjectCRDs {
		env.CRDDirectoryPaths = ProjectCRDPaths()
	}
	if env.CRDs, err = extraCRDs(in); err != nil {
		return nil, err
	}
	e := &Env{Environment: env, Scheme: Scheme(in.AddToScheme...)}
	if e.Config, err = env.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start envtest: %w", err), env.Stop())
	}
	if err := e.connect(in); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return e, nil
}

// connect makes the client and the namespaces.
func (e *Env) connect(in RunInput) error {
	var err error
	e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme, FieldValidation: in.FieldValidation})
	if err != nil {
		return err
	}
	for _, ns := range in.Namespaces {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := e.Client.Create(context.Background(), u); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// extraCRDs are the CRDs in installs beside the project's.
func extraCRDs(in RunInput) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, extra := range []struct {
		want bool
		read func() ([]*apiextensionsv1.CustomResourceDefinition, error)
	}{{in.Istio, IstioCRDs}, {in.CertManager, CertManagerCRDs}, {in.GatewayAPI, GatewayAPICRDs}, {in.CRDs != nil, in.CRDs}} {
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
