package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/apiclient"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/memlimit"
	"github.com/portico-dev/portico/operator/internal/catalog"
	"github.com/portico-dev/portico/operator/internal/reconciler"
	"github.com/portico-dev/portico/operator/internal/render"
)

// LeaderElectionID names the operator's Lease.
const LeaderElectionID = "portico-operator.operator.portico.dev"

type runOptions struct {
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	namespace     string
	imageRegistry string
	imageTag      string
	// progressDeadline overrides the catalog's rollout deadline (0 keeps it).
	progressDeadline time.Duration
	// apiBounds bound the operator's requests to the API server.
	apiBounds apiclient.Bounds
	// ownNetworkPolicy makes the operator write its own NetworkPolicy,
	// allowing what ownPolicy says (the chart's networkPolicy values).
	ownNetworkPolicy bool
	ownPolicy        struct {
		metricsNamespaces, apiServerCIDRs []string
		apiServerPorts                    []int32
	}
	zap zap.Options
}

// Flags of the operator's own NetworkPolicy.
const (
	FlagOwnNetworkPolicy                  = "own-network-policy"
	FlagOwnNetworkPolicyMetricsNamespaces = "own-network-policy-metrics-namespaces"
	FlagOwnNetworkPolicyAPIServerCIDRs    = "own-network-policy-api-server-cidrs"
	FlagOwnNetworkPolicyAPIServerPorts    = "own-network-policy-api-server-ports"
)

func (o *runOptions) bindFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.metricsAddr, contract.FlagMetricsAddress, fmt.Sprintf(":%d", contract.MetricsPort), "address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.StringVar(&o.probeAddr, contract.FlagHealthAddress, fmt.Sprintf(":%d", contract.HealthPort), "address the /healthz and /readyz endpoints bind to")
	fs.BoolVar(&o.leaderElect, contract.FlagLeaderElect, false, "elect a leader so only one replica reconciles (enable when running more than one)")
	fs.StringVar(&o.namespace, contract.FlagNamespace, namespaceDefault(), "namespace of the operator and of every controller Deployment ($POD_NAMESPACE when set)")
	fs.StringVar(&o.imageRegistry, "controller-image-registry", DefaultRegistry, "registry of the default controller images, <registry>/<name>-controller:<tag>")
	fs.StringVar(&o.imageTag, "controller-image-tag", contract.Version(), "tag of the default controller images; the operator version unless set")
	fs.DurationVar(&o.progressDeadline, "controller-progress-deadline", 0, "progress deadline of every controller Deployment, after which a stuck rollout is Degraded (0: the catalog's, 10m)")
	fs.Float64Var(&o.apiBounds.QPS, contract.FlagKubeAPIQPS, contract.DefaultKubeAPIQPS, "API requests per second the operator sends at most; 0 or less: no client-side limit")
	fs.IntVar(&o.apiBounds.Burst, contract.FlagKubeAPIBurst, contract.DefaultKubeAPIBurst, "API requests the operator may send at once above --"+contract.FlagKubeAPIQPS)
	fs.DurationVar(&o.apiBounds.Timeout, contract.FlagKubeAPITimeout, contract.DefaultKubeAPITimeout, "how long one API request other than a watch may take; 0: unbounded")
	fs.BoolVar(&o.ownNetworkPolicy, FlagOwnNetworkPolicy, false, "write and repair the operator's own NetworkPolicy, named like and owned by its Deployment (for installs that cannot carry one, such as the OLM bundle)")
	fs.StringSliceVar(&o.ownPolicy.metricsNamespaces, FlagOwnNetworkPolicyMetricsNamespaces, nil, "namespaces whose pods may reach the operator's metrics and health ports under its own NetworkPolicy (none: no pod may)")
	fs.StringSliceVar(&o.ownPolicy.apiServerCIDRs, FlagOwnNetworkPolicyAPIServerCIDRs, nil, "CIDRs the operator's own NetworkPolicy lets it reach the API server at (none: any address on the API server ports)")
	fs.Int32SliceVar(&o.ownPolicy.apiServerPorts, FlagOwnNetworkPolicyAPIServerPorts, []int32{443, 6443}, "ports the operator's own NetworkPolicy lets it reach the API server on")
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
}

// schemeBuilder registers every type the operator reads or writes.
var schemeBuilder = runtime.NewSchemeBuilder(
	corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme, discoveryv1.AddToScheme, apiextensionsv1.AddToScheme, operatorv1alpha1.AddToScheme)

// Scheme holds every type the operator reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(schemeBuilder.AddToScheme(s))
	return s
}

// clusterIP parses an IP address, or returns the zero Addr.
func clusterIP(host string) netip.Addr {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return addr
}

// relatedImages collects RELATED_IMAGE_* variables (OLM convention).
func relatedImages(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, "RELATED_IMAGE_") && v != "" {
			out[k] = v
		}
	}
	return out
}

// validated checks the options and the built-in catalog before anything
// starts, and returns the catalog in rollout order and the operator's own
// NetworkPolicy.
func (o *runOptions) validated() (catalog.Catalog, render.OperatorPolicy, error) {
	if err := catalog.Builtin.Validate(); err != nil {
		return nil, render.OperatorPolicy{}, fmt.Errorf("invalid catalog: %w", err)
	}
	ordered, err := catalog.Builtin.Ordered()
	if err != nil {
		return nil, render.OperatorPolicy{}, err
	}
	if o.progressDeadline < 0 {
		return nil, render.OperatorPolicy{}, fmt.Errorf("--controller-progress-deadline must not be negative")
	}
	ordered = ordered.WithProgressDeadline(o.progressDeadline)
	if err := o.apiBounds.Validate(); err != nil {
		return nil, render.OperatorPolicy{}, err
	}
	policy, err := o.operatorPolicy()
	if err != nil {
		return nil, render.OperatorPolicy{}, err
	}
	return ordered, policy, nil
}

func run(ctx context.Context, o *runOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	memlimit.Apply(log, os.LookupEnv)
	ordered, policy, err := o.validated()
	if err != nil {
		return err
	}

	leaderCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// Leader election keeps the unbounded configuration: its renewals never
	// wait behind the reconciler's requests.
	cfg := o.apiBounds.Apply(leaderCfg)
	apiclient.ReportThrottling()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme(),
		Cache:                         reconciler.CacheOptions(o.namespace, ordered.CRDNames()),
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionConfig:          leaderCfg,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	r := &reconciler.Reconciler{
		Client:    mgr.GetClient(),
		Catalog:   ordered,
		Namespace: o.namespace,
		Images: render.ImageDefaults{
			Registry:      o.imageRegistry,
			Tag:           o.imageTag,
			RelatedImages: relatedImages(os.Environ()),
		},
		Recorder: mgr.GetEventRecorder(operatorv1alpha1.FieldManager),
		Clock:    clock.RealClock{},
		Metrics:  reconciler.DefaultMetrics(),
		// In a pod, the API server's ClusterIP; elsewhere not set (the
		// policies then allow its endpoints only).
		APIServerClusterIP: clusterIP(os.Getenv("KUBERNETES_SERVICE_HOST")),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up reconciler: %w", err)
	}
	if o.ownNetworkPolicy {
		own := &reconciler.OwnNetworkPolicy{
			Client: mgr.GetClient(), Namespace: o.namespace, Deployment: contract.OperatorName, Policy: policy,
			Recorder: mgr.GetEventRecorder(operatorv1alpha1.FieldManager),
		}
		if err := own.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up the operator's own NetworkPolicy: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once the caches have synced, so a new leader never acts on an
	// empty view of the cluster.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}

	log.Info("Starting portico-operator", "version", contract.Version(), "namespace", o.namespace,
		"registry", o.imageRegistry, "tag", o.imageTag, "controllers", len(ordered))
	return mgr.Start(ctx)
}

// operatorPolicy is what the operator's own NetworkPolicy allows: the
// --own-network-policy-* flags and the ports the operator serves.
func (o *runOptions) operatorPolicy() (render.OperatorPolicy, error) {
	p := render.OperatorPolicy{
		MetricsNamespaces: o.ownPolicy.metricsNamespaces,
		APIServerCIDRs:    o.ownPolicy.apiServerCIDRs,
		APIServerPorts:    o.ownPolicy.apiServerPorts,
	}
	for _, ns := range p.MetricsNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return p, fmt.Errorf("--%s: %q is not a namespace name: %s", FlagOwnNetworkPolicyMetricsNamespaces, ns, strings.Join(errs, "; "))
		}
	}
	for _, cidr := range p.APIServerCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			return p, fmt.Errorf("--%s: %w", FlagOwnNetworkPolicyAPIServerCIDRs, err)
		}
	}
	if len(p.APIServerPorts) == 0 {
		return p, fmt.Errorf("--%s: name at least one port, or the operator cannot reach the API server", FlagOwnNetworkPolicyAPIServerPorts)
	}
	for _, port := range p.APIServerPorts {
		if port < 1 || port > 65535 {
			return p, fmt.Errorf("--%s: %d is not a port", FlagOwnNetworkPolicyAPIServerPorts, port)
		}
	}
	var err error
	if p.MetricsPort, err = servedPort(contract.FlagMetricsAddress, o.metricsAddr); err != nil {
		return p, err
	}
	if p.HealthPort, err = servedPort(contract.FlagHealthAddress, o.probeAddr); err != nil {
		return p, err
	}
	return p, nil
}

// servedPort is the port of a bind address such as :8080; 0 for "0" or
// "", which serve nothing.
func servedPort(flagName, addr string) (int32, error) {
	if addr == "" || addr == "0" {
		return 0, nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", flagName, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("--%s: port %q: %w", flagName, port, err)
	}
	return int32(n), nil
}
