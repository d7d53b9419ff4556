package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/quarantine"
	"github.com/portico-dev/portico/internal/apiclient"
	"github.com/portico-dev/portico/internal/backoff"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/memlimit"
)

// Controller describes one gateway controller binary.
type Controller struct {
	// Contract names the controller, its binary and the CRDs it requires
	// (all usable for the workers to run) and uses when present (their
	// coming and going restarts the workers so their watches match the
	// cluster).
	Contract contract.Controller
	// Short is the one-line description of the command.
	Short string
	// AddToScheme registers the types the controller reads and writes.
	AddToScheme []func(*runtime.Scheme) error
	// Setup registers the controller's reconcilers with the workers' manager.
	Setup func(mgr ctrl.Manager, env Environment) error
	// Cache, when set, narrows what the workers cache (label selectors,
	// transforms) before their manager is created.
	Cache func(opts *cache.Options, env Environment)
	// SlimWatched, when set, is the quarantine guard's Options.Slim: what
	// of a watched object its cache keeps, made as the guard decodes it.
	SlimWatched func(obj runtime.Object) runtime.Object
	// HandOff names the kinds whose watch events the quarantine guard,
	// which decodes them whole anyway, hands to the caches decoded
	// (quarantine.Handoff): client-go decodes a placeholder instead. Every
	// cache of the process takes them (handOffTo); nothing else of the
	// process may watch these kinds.
	HandOff []client.Object
	// Retire, when set, runs as the process stops if the APIGateway no
	// longer wants this controller (disabled, or the APIGateway deleted):
	// it removes what the controller wrote that would otherwise keep acting
	// with nobody to maintain it. It must touch only the controller's own
	// objects. The controller's RBAC needs get on apigateways.
	Retire func(ctx context.Context, c client.Client) error
	// Flags, when set, declares the binary's own flags (each listed in its
	// contract.Controller's Flags) beside the standard ones.
	Flags func(fs *pflag.FlagSet)
}

// Environment is what Setup may need to know about the process.
type Environment struct {
	// Namespace is the only namespace watched, or "" for all.
	Namespace string
	// Optional holds the usable optional CRDs, as name/version.
	Optional []string
}

// HasOptional reports whether an optional CRD is usable.
func (e Environment) HasOptional(c contract.CRD) bool {
	for _, o := range e.Optional {
		if o == c.String() {
			return true
		}
	}
	return false
}

// Options are the standard flags of every controller; the operator passes
// them in each controller Deployment.
type Options struct {
	MetricsAddr      string
	ProbeAddr        string
	LeaderElect      bool
	LeaderElectionNS string
	LogLevel         string
	Namespace        string
	ShutdownTimeout  time.Duration
	PprofAddr        string
	// APIBounds bound the process's requests to the API server.
	APIBounds apiclient.Bounds

	// Tests substitute the cluster and the log destination.
	restConfig *rest.Config
	logOutput  io.Writer
}

// NewCommand returns the cobra command of a controller binary.
func NewCommand(c Controller) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:           c.Contract.Binary(),
		Short:         c.Short,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd.Context(), c, *o)
		},
		// --version prints the version and exits before anything else runs.
		Version: contract.Version(),
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	fs := cmd.Flags()
	// Declared here rather than by cobra, which would also take -v.
	fs.Bool("version", false, "print the controller version and exit")
	fs.StringVar(&o.MetricsAddr, contract.FlagMetricsAddress, fmt.Sprintf(":%d", contract.MetricsPort), "address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.StringVar(&o.ProbeAddr, contract.FlagHealthAddress, fmt.Sprintf(":%d", contract.HealthPort), "address the /healthz and /readyz endpoints bind to")
	fs.BoolVar(&o.LeaderElect, contract.FlagLeaderElect, false, "elect a leader so only one replica runs workers")
	fs.StringVar(&o.LeaderElectionNS, contract.FlagLeaderElectionNS, "", "namespace of the leader Lease ($"+contract.EnvPodNamespace+" when empty)")
	fs.StringVar(&o.LogLevel, contract.FlagLogLevel, "info", "log verbosity: debug, info or error")
	fs.StringVar(&o.Namespace, contract.FlagNamespace, "", "watch only this namespace (all namespaces when empty)")
	fs.StringVar(&o.PprofAddr, contract.FlagPprofAddress, "", "address Go's /debug/pprof profiles are served on; empty disables them")
	fs.DurationVar(&o.ShutdownTimeout, contract.FlagGracefulShutdownTimeout, 10*time.Second, "how long workers may take to finish on shutdown")
	fs.Float64Var(&o.APIBounds.QPS, contract.FlagKubeAPIQPS, contract.DefaultKubeAPIQPS, "API requests per second the process sends at most; 0 or less: no client-side limit")
	fs.IntVar(&o.APIBounds.Burst, contract.FlagKubeAPIBurst, contract.DefaultKubeAPIBurst, "API requests the process may send at once above --"+contract.FlagKubeAPIQPS)
	fs.DurationVar(&o.APIBounds.Timeout, contract.FlagKubeAPITimeout, contract.DefaultKubeAPITimeout, "how long one API request other than a watch may take; 0: unbounded")
	if c.Flags != nil {
		c.Flags(fs)
	}
	if kubeconfig := flag.CommandLine.Lookup("kubeconfig"); kubeconfig != nil {
		fs.AddGoFlag(kubeconfig)
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the controller version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), contract.Version()) },
	})
	return cmd
}

// Main runs a controller binary's command line and exits.
func Main(c Controller) {
	if err := NewCommand(c).ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func logLevel(name string) (zapcore.Level, error) {
	switch strings.ToLower(name) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("--log-level must be debug, info or error, not %q", name)
}

// Run runs the controller until ctx ends.
func Run(ctx context.Context, c Controller, o Options) error {
	level, err := logLevel(o.LogLevel)
	if err != nil {
		return err
	}
	if err := o.APIBounds.Validate(); err != nil {
		return err
	}
	zapOpts := []zap.Opts{zap.Level(level)}
	if o.logOutput != nil {
		zapOpts = append(zapOpts, zap.WriteTo(o.logOutput))
	}
	ctrl.SetLogger(zap.New(zapOpts...))
	log := ctrl.Log.WithName(c.Contract.Binary())
	memlimit.Apply(log, os.LookupEnv)

	cfg := o.restConfig
	if cfg == nil {
		if cfg, err = ctrl.GetConfig(); err != nil {
			return fmt.Errorf("load kubeconfig: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	builder := runtime.NewSchemeBuilder(corev1.AddToScheme, appsv1.AddToScheme, apiextensionsv1.AddToScheme, operatorv1alpha1.AddToScheme)
	builder.Register(c.AddToScheme...)
	if err := builder.AddToScheme(scheme); err != nil {
		return err
	}
	// No object the API server accepts may stop the controller: every client
	// skips (and reports) objects that do not decode into their Go types.
	undecodable := &quarantineEvents{}
	handoff, err := newHandoff(scheme, c.HandOff)
	if err != nil {
		return err
	}
	leaderCfg := guardConfig(cfg, scheme, undecodable, c.SlimWatched, handoff, log.WithName("quarantine"))
	cfg = o.APIBounds.Apply(leaderCfg)
	apiclient.ReportThrottling()

	outer, err := newOuterManager(cfg, leaderCfg, scheme, handoff, c, o)
	if err != nil {
		return err
	}
	undecodable.use(outer.GetEventRecorder(c.Contract.Binary()))
	if err := addWatchdog(outer, log, workerFactory(ctx, cfg, scheme, handoff, outer, c, o, log), c); err != nil {
		return err
	}
	log.Info("Starting", "version", contract.Version(), "namespace", o.Namespace, "required", c.Contract.Required)
	startErr := outer.Start(ctx)
	if c.Retire != nil && ctx.Err() != nil {
		// Asked to stop (SIGTERM), possibly while still starting up, which
		// may have made Start fail: retire all the same. Every replica may
		// run it: removing the controller's own objects twice is harmless,
		// and a non-leader may be the last one left.
		retired, err := retireIfUnwanted(cfg, scheme, c)
		if retired {
			log.Info("The APIGateway no longer wants this controller; removed the objects it wrote")
		}
		return errors.Join(startErr, err)
	}
	return startErr
}

// newOuterManager creates the manager that runs whatever CRDs come and go:
// leader election, probes, metrics and the schema-less CRD cache. Leader
// election uses leaderCfg, without the request bounds, so that bulk work
// never makes a renewal wait for the token bucket.
func newOuterManager(cfg, leaderCfg *rest.Config, scheme *runtime.Scheme, handoff *quarantine.Handoff, c Controller, o Options) (ctrl.Manager, error) {
	leaderNS := o.LeaderElectionNS
	if leaderNS == "" {
		leaderNS = os.Getenv(contract.EnvPodNamespace)
	}
	if o.LeaderElect && leaderNS == "" {
		return nil, fmt.Errorf("leader election needs --%s or $%s", contract.FlagLeaderElectionNS, contract.EnvPodNamespace)
	}
	var watched []string
	for _, crd := range append(slices.Clone(c.Contract.Required), c.Contract.Optional...) {
		watched = append(watched, crd.Name)
	}
	cacheOpts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		// Informers watch again within a second of the API server's
		// return, whatever the outage (package backoff).
		NewInformer: backoff.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: contract.TransformCRD(watched)},
		},
	}
	handOffTo(&cacheOpts, handoff)
	outer, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionConfig:          leaderCfg,
		LeaderElectionID:              c.Contract.LeaderElectionID(),
		LeaderElectionNamespace:       leaderNS,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.ShutdownTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return outer, nil
}

// workerFactory returns what the watchdog calls to build the workers'
// manager each time the required CRDs become usable, with the usable
// optional CRDs.
func workerFactory(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, handoff *quarantine.Handoff, outer ctrl.Manager, c Controller, o Options, log logr.Logger) innerFactory {
	return func(optional []string) (ctrl.Manager, error) {
		env := Environment{Namespace: o.Namespace, Optional: optional}
		cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), NewInformer: backoff.NewInformer}
		if o.Namespace != "" {
			cacheOpts.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
		}
		if c.Cache != nil {
			c.Cache(&cacheOpts, env)
		}
		handOffTo(&cacheOpts, handoff)
		inner, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                  scheme,
			Cache:                   cacheOpts,
			Metrics:                 metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:  "0",
			GracefulShutdownTimeout: &o.ShutdownTimeout,
			// Workers are rebuilt whenever CRDs come back; their controller
			// names repeat within the process by design.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
			Logger:     log,
		})
		if err != nil {
			return nil, err
		}
		if err := awaitDiscovery(ctx, outer.GetCache(), inner.GetRESTMapper(), c.Contract.Required); err != nil {
			return nil, err
		}
		if err := c.Setup(inner, env); err != nil {
			return nil, fmt.Errorf("set up %s workers: %w", c.Contract.Name, err)
		}
		return inner, nil
	}
}

// addWatchdog adds the CRD watchdog that runs the workers, and the probes
// that report on it, to the outer manager.
func addWatchdog(outer ctrl.Manager, log logr.Logger, factory innerFactory, c Controller) error {
	dog := newWatchdog(log.WithName("watchdog"), outer.GetCache(),
		func(ctx context.Context) (cache.Informer, error) {
			return outer.GetCache().GetInformer(ctx, &apiextensionsv1.CustomResourceDefinition{})
		}, c.Contract.Required, c.Contract.Optional, factory)
	if err := outer.Add(dog); err != nil {
		return err
	}
	if err := outer.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return outer.AddReadyzCheck("readyz", dog.readyz)
}

var _ manager.LeaderElectionRunnable = &watchdog{}
