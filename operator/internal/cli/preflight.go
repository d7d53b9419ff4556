package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/catalog"
	"github.com/portico-dev/portico/operator/internal/gating"
)

func newPreflightCommand() *cobra.Command {
	var timeout time.Duration
	var namespace string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Tell which controllers would run on this cluster and what the others miss",
		Long: `preflight reads the cluster's CRDs and the APIGateway "default" (when present)
and prints, for every controller of the catalog, whether it would run. It exits
0 when every enabled controller can run and 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("load kubeconfig: %w", err)
			}
			c, err := client.New(cfg, client.Options{Scheme: Scheme()})
			if err != nil {
				return fmt.Errorf("create client: %w", err)
			}
			results, err := Preflight(ctx, c, catalog.Builtin, namespace)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CONTROLLER\tWOULD RUN\tREASON\tDETAILS")
			ok := true
			for _, r := range results {
				would, reason, details := "yes", "-", "all required CRDs are established"
				if !r.Result.Run {
					would, reason, details = "no", r.Result.Reason, r.Result.Message
					if r.Enabled {
						ok = false
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Name, would, reason, details)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if !ok {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the API server")
	cmd.Flags().StringVar(&namespace, "namespace", "portico-system", "Portico's namespace, where spec.rateLimits.global's Redis Secret lives")
	return cmd
}

// PreflightResult is one controller's answer.
type PreflightResult struct {
	Name    operatorv1alpha1.ControllerName
	Enabled bool
	Result  gating.Result
}

// Preflight evaluates every controller's preconditions against the cluster,
// reading CRDs, the APIGateway and the Secret it names in Portico's
// namespace directly (no cache).
func Preflight(ctx context.Context, c client.Reader, cat catalog.Catalog, namespace string) ([]PreflightResult, error) {
	crds := map[string]gating.CRDState{}
	for _, name := range cat.CRDNames() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read CRD %s: %w", name, err)
		}
		crds[name] = contract.StateOf(crd)
	}
	gw := &operatorv1alpha1.APIGateway{}
	if err := c.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
		// No APIGateway (or not even its CRD): every controller has its defaults.
		if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("read APIGateway: %w", err)
		}
		gw = &operatorv1alpha1.APIGateway{}
	}
	secrets, err := preflightSecrets(ctx, c, &gw.Spec, namespace)
	if err != nil {
		return nil, err
	}
	ordered, err := cat.Ordered()
	if err != nil {
		return nil, err
	}
	// A dependency that would run is assumed to become Ready.
	phases := map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{}
	var out []PreflightResult
	for _, e := range ordered {
		enabled := gw.Spec.ControllerEnabled(e.Name)
		res := gating.Evaluate(gating.Input{Entry: e, Enabled: enabled, Spec: &gw.Spec,
			Cluster: gating.Cluster{CRDs: crds, Phases: phases, Namespace: namespace, Secrets: secrets}})
		phases[e.Name] = res.Phase
		if res.Run {
			phases[e.Name] = operatorv1alpha1.PhaseReady
		}
		// A component the spec does not configure is not wanted.
		out = append(out, PreflightResult{Name: e.Name, Enabled: enabled && res.Phase != operatorv1alpha1.PhaseDisabled, Result: res})
	}
	return out, nil
}

// preflightSecrets reads the Redis Secret spec.rateLimits.global names, if
// any, as gating sees it.
func preflightSecrets(ctx context.Context, c client.Reader, spec *operatorv1alpha1.APIGatewaySpec, namespace string) (map[string]gating.SecretState, error) {
	global := spec.GlobalRateLimits()
	if global == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: global.Redis.SecretName}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, global.Redis.SecretName, err)
	}
	st := gating.SecretState{Address: string(secret.Data[contract.RedisAddressKey])}
	for k := range secret.Data {
		st.Keys = append(st.Keys, k)
	}
	return map[string]gating.SecretState{secret.Name: st}, nil
}
