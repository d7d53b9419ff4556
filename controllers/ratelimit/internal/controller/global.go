package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
	"github.com/portico-dev/portico/internal/globallimit"
)

// The rate-limit service's feed and key live in Portico's namespace, which
// only administrators write.
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=secrets,verbs=get;list;watch;create

// Global is the administrator's global rate limiting as the operator
// passes it to the controller (APIGateway spec.rateLimits.global).
type Global struct {
	// Enabled is true while the administrator configured global rate
	// limits and the operator runs Portico's rate-limit service.
	Enabled bool
	// FailOpen lets gateways serve when the service cannot answer.
	FailOpen bool
	// Timeout bounds each decision.
	Timeout time.Duration
	// Namespace is Portico's namespace: the service, the ConfigMaps of its
	// feed and the key Secret live there.
	Namespace string
}

const kindConfigMap = "ConfigMap"

// errOverBudget marks a feed ConfigMap over MaxGlobalConfigBytes.
var errOverBudget = errors.New("over budget")

// MaxGlobalConfigBytes is the budget of one namespace's feed ConfigMap
// (the API server stores up to about 1 MiB of ConfigMap data).
const MaxGlobalConfigBytes = 512 << 10

// ConfigureGlobalCache caches, in Portico's namespace ns, the feed's
// ConfigMaps and the key Secret only.
func ConfigureGlobalCache(opts *cache.Options, ns string) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&corev1.ConfigMap{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{ns: {}},
		Label:      labels.SelectorFromSet(labels.Set{globallimit.LabelConfig: "true"}),
	}
	opts.ByObject[&corev1.Secret{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{ns: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", globallimit.KeySecretName),
	}
}

// globalInput is the topology's view of global rate limiting: nil while it
// is not enabled. The key Secret is created, once, with random bytes when
// it does not exist; an administrator may provide their own (at least 16
// bytes) before enabling global limits.
func (r *Reconciler) globalInput(ctx context.Context) (*topology.Global, error) {
	if !r.Global.Enabled {
		return nil, nil
	}
	key, err := r.globalKey(ctx)
	if err != nil {
		return nil, err
	}
	return &topology.Global{ServiceNamespace: r.Global.Namespace, FailOpen: r.Global.FailOpen, Timeout: r.Global.Timeout, Key: key}, nil
}

const minKeyBytes = 16

func (r *Reconciler) globalKey(ctx context.Context) ([]byte, error) {
	ref := client.ObjectKey{Namespace: r.Global.Namespace, Name: globallimit.KeySecretName}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, ref, secret)
	if apierrors.IsNotFound(err) {
		secret, err = r.createKey(ctx, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read the global rate limit key %s: %w", ref, err)
	}
	key := secret.Data[globallimit.KeySecretData]
	if len(key) < minKeyBytes {
		return nil, fmt.Errorf("the global rate limit key %s has %d bytes in %q, fewer than %d", ref, len(key), globallimit.KeySecretData, minKeyBytes)
	}
	return key, nil
}

func (r *Reconciler) createKey(ctx context.Context, ref client.ObjectKey) (*corev1.Secret, error) {
	key := make([]byte, globallimit.KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, Labels: map[string]string{globallimit.LabelManagedBy: globallimit.ManagedBy}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{globallimit.KeySecretData: key},
	}
	err := r.Client.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		// Created meanwhile (the cache lagged): read it past the cache.
		secret = &corev1.Secret{}
		err = r.Reader.Get(ctx, ref, secret)
	}
	if err == nil {
		ctrl.LoggerFrom(ctx).Info("Created the global rate limit key", "secret", ref.String())
	}
	return secret, err
}

// globalConfigMap is the feed ConfigMap of one namespace's limits.
func (r *Reconciler) globalConfigMap(c globallimit.Config) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kindConfigMap},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Global.Namespace, Name: globallimit.ConfigMapName(c.Namespace),
			Labels: map[string]string{
				globallimit.LabelConfig: "true", globallimit.LabelNamespace: c.Namespace,
				globallimit.LabelManagedBy: globallimit.ManagedBy,
			},
		},
		Data: map[string]string{globallimit.ConfigData: c.Marshal()},
	}
}

// writeGlobalConfig writes a namespace's limits for the rate-limit service
// unless the live ConfigMap already holds them.
func (r *Reconciler) writeGlobalConfig(ctx context.Context, c globallimit.Config, live map[string]*corev1.ConfigMap) error {
	desired := r.globalConfigMap(c)
	if size := len(desired.Data[globallimit.ConfigData]); size > MaxGlobalConfigBytes {
		return fmt.Errorf("the global rate limits of namespace %s would take %d KiB in the rate-limit service's configuration, over its budget of %d KiB, so they are not written (the previous ones, if any, stay in force); use fewer global rules: %w",
			c.Namespace, (size+1023)>>10, MaxGlobalConfigBytes>>10, errOverBudget)
	}
	return r.writeConfig(ctx, desired, live[desired.Name])
}

// liveGlobalConfigs are the feed ConfigMaps in the cache, by name: those
// of namespace ns (by the label that names it), or every one for "".
func (r *Reconciler) liveGlobalConfigs(ctx context.Context, ns string) (map[string]*corev1.ConfigMap, error) {
	live := map[string]*corev1.ConfigMap{}
	if !r.Global.Enabled {
		return live, nil
	}
	selector := client.MatchingLabels{globallimit.LabelConfig: "true"}
	if ns != "" {
		selector[globallimit.LabelNamespace] = ns
	}
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Global.Namespace), selector); err != nil {
		return nil, fmt.Errorf("list the rate-limit service's ConfigMaps: %w", err)
	}
	for i := range list.Items {
		live[list.Items[i].Name] = &list.Items[i]
	}
	return live, nil
}
