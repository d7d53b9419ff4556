package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/server"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/store"
	"github.com/portico-dev/portico/internal/apiclient"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/internal/memlimit"
)

// Flags of the service besides the standard ones (internal/contract).
const (
	flagGRPCAddress    = contract.FlagGRPCAddress
	flagRedisConfigDir = contract.FlagRedisConfigDir
	flagRedisTLS       = contract.FlagRedisTLS
	flagMaxKeysPerRule = contract.FlagMaxKeysPerRule
)

type options struct {
	server      server.Options
	logLevel    string
	apiBounds   apiclient.Bounds
	leaderElect bool   // accepted, ignored: every replica serves
	leaderNS    string // accepted, ignored
}

func main() {
	if err := newCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:           globallimit.ServiceName,
		Short:         "Answers the gateways' global rate limit calls (Envoy RateLimitService v3), counting in Redis",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		Version:       contract.Version(),
		RunE:          func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	fs := cmd.Flags()
	fs.Bool("version", false, "print the version and exit")
	s := &o.server
	fs.StringVar(&s.MetricsAddr, contract.FlagMetricsAddress, fmt.Sprintf(":%d", contract.MetricsPort), "address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.StringVar(&s.HealthAddr, contract.FlagHealthAddress, fmt.Sprintf(":%d", contract.RateLimitServiceHealthPort), "address the /healthz and /readyz endpoints bind to (not the gRPC port)")
	fs.StringVar(&s.GRPCAddr, flagGRPCAddress, fmt.Sprintf(":%d", globallimit.GRPCPort), "address the RateLimitService v3 gRPC server binds to")
	fs.StringVar(&s.RedisDir, flagRedisConfigDir, "/etc/portico/redis", "directory of the Redis connection files: address (host:port, required), username, password, ca.crt; re-read when they change")
	fs.BoolVar(&s.RedisTLS, flagRedisTLS, false, "connect to Redis with TLS (ca.crt of --"+flagRedisConfigDir+" as the root CA when present)")
	fs.Int64Var(&s.MaxKeysPerRule, flagMaxKeysPerRule, store.DefaultMaxKeys, "distinct client keys per limit and window; clients beyond share one overflow budget")
	fs.DurationVar(&s.ShutdownTimeout, contract.FlagGracefulShutdownTimeout, 10*time.Second, "how long calls in flight may take to finish on shutdown")
	fs.StringVar(&s.Namespace, contract.FlagNamespace, "", "Portico's namespace, where the limits ConfigMaps and the key Secret are ($"+contract.EnvPodNamespace+" when empty)")
	fs.StringVar(&o.logLevel, contract.FlagLogLevel, "info", "log verbosity: debug, info or error")
	fs.BoolVar(&o.leaderElect, contract.FlagLeaderElect, false, "accepted for the operator's standard flags and ignored: every replica serves")
	fs.StringVar(&o.leaderNS, contract.FlagLeaderElectionNS, "", "accepted and ignored, as --"+contract.FlagLeaderElect)
	fs.Float64Var(&o.apiBounds.QPS, contract.FlagKubeAPIQPS, contract.DefaultKubeAPIQPS, "API requests per second the process sends at most; 0 or less: no client-side limit")
	fs.IntVar(&o.apiBounds.Burst, contract.FlagKubeAPIBurst, contract.DefaultKubeAPIBurst, "API requests the process may send at once above --"+contract.FlagKubeAPIQPS)
	fs.DurationVar(&o.apiBounds.Timeout, contract.FlagKubeAPITimeout, contract.DefaultKubeAPITimeout, "how long one API request other than a watch may take; 0: unbounded")
	// controller-runtime's --kubeconfig, read by ctrl.GetConfig.
	if kubeconfig := flag.CommandLine.Lookup(contract.FlagKubeconfig); kubeconfig != nil {
		fs.AddGoFlag(kubeconfig)
	}
	return cmd
}

func run(ctx context.Context, o *options) error {
	level, err := logLevel(o.logLevel)
	if err != nil {
		return err
	}
	if err := o.apiBounds.Validate(); err != nil {
		return err
	}
	if o.server.MaxKeysPerRule < 1 {
		return fmt.Errorf("--%s must be at least 1, not %d", flagMaxKeysPerRule, o.server.MaxKeysPerRule)
	}
	if o.server.Namespace == "" {
		o.server.Namespace = os.Getenv(contract.EnvPodNamespace)
	}
	if o.server.Namespace == "" {
		return fmt.Errorf("--%s or $%s must name Portico's namespace", contract.FlagNamespace, contract.EnvPodNamespace)
	}
	ctrl.SetLogger(zap.New(zap.Level(level)))
	log := ctrl.Log.WithName(globallimit.ServiceName)
	memlimit.Apply(log, os.LookupEnv)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(o.apiBounds.Apply(cfg))
	if err != nil {
		return fmt.Errorf("build API client: %w", err)
	}
	o.server.Kube = kube
	o.server.Log = log
	return server.Run(ctx, o.server)
}

func logLevel(name string) (zapcore.Level, error) {
	switch name {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("--%s must be debug, info or error, not %q", contract.FlagLogLevel, name)
}
