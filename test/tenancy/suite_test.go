package tenancy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

const (
	// eventually bounds every wait for the controllers: generous, as the
	// suite asserts outcomes, never speed.
	eventually = 30 * time.Second
	poll       = 250 * time.Millisecond

	teamA         = "team-a"
	teamB         = "team-b"
	rootNamespace = "istio-system"
	systemNS      = "portico-system"
)

// The cluster as the suite sees it: the administrator and the two tenants.
var (
	restConfig *rest.Config
	admin      client.Client
	// alice holds edit in team-a; bob holds admin in team-b. Both may also
	// write the status subresources of their namespace (the stronger case).
	alice, bob client.Client
	// workDir holds the binaries, kubeconfigs and controller logs.
	workDir string
)

func TestMain(m *testing.M) {
	// Portico's CRDs, the real Istio CRDs and the Gateway API's.
	os.Exit(testenv.Run(m, testenv.RunInput{
		Istio:      true,
		GatewayAPI: true,
		AddToScheme: []func(*runtime.Scheme) error{
			discoveryv1.AddToScheme, eventsv1.AddToScheme, rbacv1.AddToScheme, gatewayv1alpha1.AddToScheme,
			networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, securityv1.AddToScheme,
			gatewayapiv1.Install, gatewayapiv1beta1.Install,
		},
		Setup:    setUp,
		Teardown: tearDown,
	}))
}

// setUp prepares the cluster, the tenants' clients and the controllers,
// which run as processes under their ServiceAccounts.
func setUp(ctx context.Context, env *testenv.Env) error {
	var err error
	if workDir, err = os.MkdirTemp("", "portico-tenancy-"); err != nil {
		return err
	}
	restConfig, admin = env.Config, env.Client
	kubeconfig := filepath.Join(workDir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := setUpCluster(ctx); err != nil {
		return fmt.Errorf("set up the cluster: %w", err)
	}
	if alice, err = tenant("alice", "team-a-devs"); err != nil {
		return err
	}
	if bob, err = tenant("bob", "team-b-devs"); err != nil {
		return err
	}
	if err := startRedis(ctx); err != nil {
		return fmt.Errorf("start Redis for the rate-limit service: %w", err)
	}
	return startControllers(ctx, kubeconfig)
}

// tearDown stops the controllers and keeps their logs when the suite
// failed.
func tearDown(code int) {
	stopControllers()
	stopRedis()
	if workDir == "" {
		return
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "tenancy suite: controller logs are kept in", workDir)
		return
	}
	_ = os.RemoveAll(workDir)
}

// tenant is a client that impersonates a user of a group, as a tenant's
// kubeconfig would authenticate.
func tenant(user, group string) (client.Client, error) {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{group}}
	return client.New(cfg, client.Options{Scheme: admin.Scheme()})
}
