package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/framework"
	"github.com/portico-dev/portico/test/testenv"
)

// controllerNames are the controller binaries under test.
var controllerNames = []string{"apirule", "ratelimit"}

var (
	env   *testenv.Env
	admin client.Client
	// workDir holds the binaries, the kubeconfig and the controller logs.
	workDir    string
	kubeconfig string
	// binaries are the built controllers by name.
	binaries = map[string]string{}
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		Istio:       true,
		GatewayAPI:  true,
		Restartable: true,
		AddToScheme: []func(*runtime.Scheme) error{
			discoveryv1.AddToScheme, gatewayv1alpha1.AddToScheme, networkingv1.AddToScheme,
			networkingv1alpha3.AddToScheme, securityv1.AddToScheme, gatewayapiv1.Install, gatewayapiv1beta1.Install,
		},
		Setup:    setUp,
		Teardown: tearDown,
	}))
}

// setUp builds the controller binaries; each test starts the controllers
// it needs.
func setUp(ctx context.Context, e *testenv.Env) error {
	env, admin = e, e.Client
	var err error
	if workDir, err = os.MkdirTemp("", "portico-chaos-"); err != nil {
		return err
	}
	kubeconfig = filepath.Join(workDir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, e.KubeConfig, 0o600); err != nil {
		return err
	}
	for _, name := range controllerNames {
		if binaries[name], err = testenv.BuildController(ctx, workDir, name); err != nil {
			return err
		}
	}
	return nil
}

// tearDown keeps the controller logs when the suite failed.
func tearDown(code int) {
	if workDir == "" {
		return
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "chaos suite: controller logs are kept in", workDir)
		return
	}
	_ = os.RemoveAll(workDir)
}

// startController runs a controller binary as the administrator until the
// test ends, and waits until it is ready.
func startController(t *testing.T, name string) {
	t.Helper()
	probe, err := testenv.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(workDir, fmt.Sprintf("%s-%s.log", t.Name(), name))
	p, err := framework.StartProcess(binaries[name], []string{
		"--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=" + probe,
	}, nil, log)
	if err != nil {
		t.Fatalf("start %s-controller: %v", name, err)
	}
	t.Cleanup(p.Stop)
	deadline := time.Now().Add(time.Minute)
	for {
		if p.Exited() {
			t.Fatalf("%s-controller exited; see %s", name, log)
		}
		if resp, err := http.Get("http://" + probe + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-controller not ready after a minute; see %s", name, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
