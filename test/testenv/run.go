package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	// Restartable keeps the API server's certificates in a directory of
	// their own, so that Env.KillAPIServer and Env.StartAPIServer take it
	// away and bring it back on the same address with the same serving
	// certificate: clients configured before the outage reach it again, as
	// after a real API server restart (chaos tests). etcd keeps running.
	Restartable bool
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
	// certDir holds the API server's certificates when RunInput.Restartable.
	certDir string
}

// KillAPIServer kills the API server (only with RunInput.Restartable), as
// a crash would: no graceful shutdown, every request fails until
// StartAPIServer. (envtest's own stop is graceful and waits for up to 20 s
// while the API server drains its watches.)
func (e *Env) KillAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server is not restartable (RunInput.Restartable)")
	}
	pid, err := e.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill kube-apiserver (pid %d): %w", pid, err)
	}
	// envtest sees the process gone and forgets it (its certificates stay).
	return e.ControlPlane.APIServer.Stop()
}

// apiServerPID finds the API server's process: the kube-apiserver whose
// --cert-dir is this environment's.
func (e *Env) apiServerPID() (int, error) {
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, path := range cmdlines {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" || !slices.Contains(args, "--cert-dir="+e.certDir) {
			continue
		}
		return strconv.Atoi(filepath.Base(filepath.Dir(path)))
	}
	return 0, fmt.Errorf("no kube-apiserver process with --cert-dir=%s", e.certDir)
}

// StartAPIServer starts the killed API server again, on the same address
// with the same certificates, and returns once it reports healthy.
func (e *Env) StartAPIServer() error {
	if e.certDir == "" {
		return errors.New("the API server is not restartable (RunInput.Restartable)")
	}
	return e.ControlPlane.APIServer.Start()
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
	if fuzzWorker() {
		// A fuzz worker only runs the fuzz target's function, which never
		// uses the control plane; one started in each worker would take the
		// CPU from the fuzzing and outlive a worker the coordinator kills.
		return m.Run()
	}
	env, err := start(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := env.stop(); err != nil {
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

// fuzzWorker reports whether this test binary runs as a worker of go test
// -fuzz (the coordinator starts it with -test.fuzzworker).
func fuzzWorker() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
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
	if in.Restartable {
		// envtest removes a certificate directory it made itself when the
		// API server stops, and makes a new CA on the next start; one given
		// here is kept (and removed by stop).
		if e.certDir, err = os.MkdirTemp("", "portico-apiserver-"); err != nil {
			return nil, err
		}
		env.ControlPlane.APIServer = &envtest.APIServer{CertDir: e.certDir}
	}
	if e.Config, err = env.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start envtest: %w", err), e.stop())
	}
	if err := e.connect(in); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	return e, nil
}

// stop stops the control plane and removes what start made for it.
func (e *Env) stop() error {
	err := e.Stop()
	if e.certDir != "" {
		err = errors.Join(err, os.RemoveAll(e.certDir))
	}
	return err
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
