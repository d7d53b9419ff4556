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
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
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

func scheme() *runtime.Scheme {
	return testenv.Scheme(
		corev1.AddToScheme, discoveryv1.AddToScheme, rbacv1.AddToScheme,
		gatewayv1alpha1.AddToScheme, operatorv1alpha1.AddToScheme,
		networkingv1.AddToScheme, networkingv1alpha3.AddToScheme, securityv1.AddToScheme,
		gatewayapiv1.Install, gatewayapiv1beta1.Install,
	)
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenancy suite:", err)
		code = 1
	}
	if code != 0 && workDir != "" {
		fmt.Fprintln(os.Stderr, "tenancy suite: controller logs are kept in", workDir)
	} else if workDir != "" {
		_ = os.RemoveAll(workDir)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if workDir, err = os.MkdirTemp("", "portico-tenancy-"); err != nil {
		return 0, err
	}
	// Portico's CRDs, the real Istio CRDs and the Gateway API's.
	env, err := testenv.Start(testenv.Options{Istio: true, GatewayAPI: true, Scheme: scheme()})
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	restConfig, admin = env.Config, env.Client
	kubeconfig := filepath.Join(workDir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := setUpCluster(ctx); err != nil {
		return 0, fmt.Errorf("set up the cluster: %w", err)
	}
	if alice, err = tenant("alice", "team-a-devs"); err != nil {
		return 0, err
	}
	if bob, err = tenant("bob", "team-b-devs"); err != nil {
		return 0, err
	}
	defer stopControllers()
	if err := startControllers(ctx, kubeconfig); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// tenant is a client that impersonates a user of a group, as a tenant's
// kubeconfig would authenticate.
func tenant(user, group string) (client.Client, error) {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{group}}
	return client.New(cfg, client.Options{Scheme: scheme()})
}
